// Anchor translation unit for the zt_torch_pch object library (it only exists
// so CMake has something to compile the shared precompiled header with).
