"""Whether an op call in the application's Python is reached on XPU, read statically from its source.

vLLM picks code per platform in a handful of ways; each is modelled here, and each through its callers:
- a platform check (`current_platform.is_cuda()`, a capability check, `get_device_capability()`, which is None on
  XPU), a tensor-device guard (`x.is_cuda`), or `hasattr(torch.ops._C, "op")` for an op the kernels do not
  define, guarding the call, an early return before it, or a flag (local, `self.` attribute, module name) or a
  predicate function derived from them;
- a function whose every reference (call, `op_func=` of `direct_register_custom_op`, then `torch.ops.vllm.<name>`)
  is not reached; a module imported only where it is not reached (`if is_rocm(): from .amd import ...`);
- a class whose every reference is not reached (a quant method chosen after `if is_xpu(): return ...`);
- a backend class whose `_supports_current_device()` is false on XPU;
- a CustomOp's `forward_cuda` (or `_hip`, ...), when what XPU runs (`forward_xpu`, by default `forward_native`)
  does not call it;
- a method an XPU subclass (an `xpu` module, or `XPU` in its name) overrides without calling it;
- torch.cuda's state (`torch.cuda.is_available()`), false on XPU, and its CUDA device queries
  (`torch.cuda.get_device_capability()`), which raise there: code after one never runs (see torch_cuda.py; a
  torch.cuda function the application replaces with XPU's is neither);
- a backend or kernel chosen by name: `backend == "cooperative"` where the function that chose it never returns
  that string on XPU, or always returns another (see flow.py), directly, through a local or a `self.` flag;
- a class listed only under another platform's key of a table keyed by `PlatformEnum`;
- an attention backend that an enum of class paths names, which the XPU platform's `get_attn_backend_cls` never
  returns and no code XPU runs names by its member (see backends.py); a method of another platform's class;
- a method whose every call by name (`x.method(...)`, through any object) is not reached;
- a class listed in a table asked only whether it holds a class (`kernel in BACKEND_KERNELS[name]`, see tables.py);
- a method a subclass overrides without `super()`: not run through that subclass, only through the class's other uses;
- a class whose path in quotes is written only as whole strings in code XPU never runs (another platform's method);
- a branch a function takes on its own arguments (`if rope_dim_offset == 0 and not inverse:`), reached only
  through the calls whose arguments (or the defaults) can take it.

A class a package imports on XPU and a registry names with that package (`("pkg.models", "Model")`) is reached.

Anything not derived this way is reached: the model dismisses a call only with a line of evidence, and says
which. Unknown values, references it cannot resolve and chains deeper than MAX_DEPTH count as reached.
"""

from kpatch.verify.contract.reach.paths import Reach
from kpatch.verify.contract.reach.verdict import MAX_DEPTH, REACHED_UNKNOWN, Value, Verdict

__all__ = ["MAX_DEPTH", "REACHED_UNKNOWN", "Reach", "Value", "Verdict"]
