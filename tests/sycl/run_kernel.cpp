// Runs free-function SYCL kernels compiled at run time from source
// (sycl_ext_oneapi_kernel_compiler) on the default device: the test harness for kernel code
// that ships in a patch file.
//
//   run_kernel SOURCE PLAN [NAME=PATH ...]
// SOURCE is compiled once; each NAME=PATH makes PATH's text the file `#include "NAME"` finds. Each PLAN line is one launch: KERNEL GLOBAL LOCAL ARG...
//   ARG: buf:PATH+OFFSET  pointer OFFSET bytes into PATH's bytes in USM shared memory; every file
//                         is loaded once, shared by all launches, and written back at the end
//        i64:VALUE        a 64-bit integer
//        null             a null pointer
// Prints the device name, then `device_type cpu|gpu|other`; exits non-zero with a message on any failure.
#include <sycl/sycl.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace syclexp = sycl::ext::oneapi::experimental;

static std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Buffer {
  void* data;
  size_t size;
};

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::cerr << "usage: run_kernel SOURCE PLAN [NAME=PATH ...]\n";
    return 2;
  }
  sycl::queue q;
  const sycl::device device = q.get_device();
  const auto type = device.get_info<sycl::info::device::device_type>();
  std::cout << device.get_info<sycl::info::device::name>() << "\ndevice_type "
            << (type == sycl::info::device_type::cpu   ? "cpu"
                : type == sycl::info::device_type::gpu ? "gpu"
                                                       : "other")
            << std::endl;
  std::string source = read_text(argv[1]);
  syclexp::include_files includes;
  for (int i = 3; i < argc; ++i) {
    std::string spec = argv[i];
    size_t eq = spec.find('=');
    if (eq == std::string::npos) throw std::runtime_error("bad include " + spec + " (want NAME=PATH)");
    includes.add(spec.substr(0, eq), read_text(spec.substr(eq + 1)));
  }
  auto src_bundle = syclexp::create_kernel_bundle_from_source(
      q.get_context(), syclexp::source_language::sycl, source, syclexp::properties{includes});
  auto exe = syclexp::build(src_bundle);

  std::map<std::string, Buffer> files;
  std::istringstream plan(read_text(argv[2]));
  std::string line;
  int launches = 0;
  while (std::getline(plan, line)) {
    std::istringstream words(line);
    std::string name;
    size_t global = 0, local = 0;
    if (!(words >> name >> global >> local)) continue;
    sycl::kernel kernel = exe.ext_oneapi_get_kernel(name);
    std::vector<std::string> args;
    for (std::string arg; words >> arg;) args.push_back(arg);
    q.submit([&](sycl::handler& h) {
       for (size_t i = 0; i < args.size(); ++i) {
         const std::string& arg = args[i];
         if (arg.rfind("buf:", 0) == 0) {
           size_t plus = arg.rfind('+');
           std::string path = arg.substr(4, plus - 4);
           size_t offset = std::stoull(arg.substr(plus + 1));
           auto it = files.find(path);
           if (it == files.end()) {
             std::string bytes = read_text(path);
             void* data = sycl::malloc_shared(bytes.size() ? bytes.size() : 1, q);
             std::memcpy(data, bytes.data(), bytes.size());
             it = files.emplace(path, Buffer{data, bytes.size()}).first;
           }
           if (offset > it->second.size) throw std::runtime_error("offset past the end of " + path);
           h.set_arg(i, static_cast<void*>(static_cast<char*>(it->second.data) + offset));
         } else if (arg.rfind("i64:", 0) == 0) {
           h.set_arg(i, static_cast<int64_t>(std::stoll(arg.substr(4))));
         } else if (arg == "null") {
           h.set_arg(i, static_cast<void*>(nullptr));
         } else {
           throw std::runtime_error("bad argument " + arg);
         }
       }
       h.parallel_for(sycl::nd_range<1>{global, local}, kernel);
     }).wait_and_throw();
    ++launches;
  }
  for (auto& [path, buf] : files) {
    std::ofstream out(path, std::ios::binary);
    out.write(static_cast<const char*>(buf.data), buf.size);
    sycl::free(buf.data, q);
  }
  std::cout << launches << " launches" << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "run_kernel: " << e.what() << "\n";
  return 1;
}
