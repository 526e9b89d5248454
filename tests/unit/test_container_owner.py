"""Which build containers a run may remove as leftovers: only those whose kpatch process is gone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from kpatch.container.docker import owner, owner_alive


def test_a_running_process_on_this_host_keeps_its_containers() -> None:
    assert owner() == f"{socket.gethostname()}:{os.getpid()}" and owner_alive(owner())


def test_a_finished_process_and_an_unlabelled_container_are_leftovers() -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not owner_alive(f"{socket.gethostname()}:{done.stdout.strip()}")
    assert not owner_alive("")


def test_another_hosts_run_is_not_judged_from_here() -> None:
    assert owner_alive("some-other-build-host.invalid:1")
