"""`kpatch verify`: the built pair against its lock, the op contract between the two patched worktrees, and with
`--installed` the environment (versions, RECORD hashes, provenance, patches, and the live dispatcher).

A plain face: importing `kpatch.verify.model` (a check's record) must not load the contract analyser, so nothing
is imported here; the build's contract gate is `kpatch.verify.gate`, `kpatch verify` itself `kpatch.verify.run`.
"""
