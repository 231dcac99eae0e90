"""The runtime: what runs compiled code and owns its memory, apart from the IR.

- `jit`: kernel modules compiled to machine code (MCJIT), kernels called on arrays, native call sequences;
- `thread_pool`: the native thread pool that runs a kernel's row chunks;
- `arrays`: aligned, C-contiguous arrays as kernels take them;
- `buffer_plan`: buffers for a sequence of steps' values, reused by liveness (host and device);
- `device_run`: consecutive steps on one device (a GPU) run as one, their values kept there;
- `saved`: the file of a saved Executable (`Executable.save`, `graphopt.load`): written from a
  copy of the placed module, read back with its constants put back as they were.

The runtime never rewrites IR and knows no backend; the lowering it compiles comes from
`graphopt.lowering`.
"""
