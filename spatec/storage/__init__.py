"""Storage tricks behind small interfaces: atomic and direct writes, the forked
checkpoint writer, watching a directory."""
