import json
import os
import shutil
import subprocess
import sys

root = "/tmp/kpatch-env"
with open(os.path.join(root, "request.json")) as file:
    request = json.load(file)
os.chdir(os.path.join(root, "src"))
cert = ["--cert", os.path.join(root, "ca.pem")] if os.path.exists(os.path.join(root, "ca.pem")) else []
pip = [sys.executable, "-m", "pip"]
step = subprocess.run([*pip, "install", "--user", "--no-cache-dir", "--progress-bar", "off", *cert,
                       *request["wheels"], *request["requires"]])
if step.returncode:
    sys.exit(step.returncode)
subprocess.run([*pip, "uninstall", "--yes", *request["packages"]], check=True)
shutil.rmtree(root)
print("kpatch: test image ready")
