"""The [sycl] extra: torch on the CPU and kernels on a real SYCL device (Intel's OpenCL CPU runtime)."""
