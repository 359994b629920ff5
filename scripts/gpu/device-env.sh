# Sourced by the device-side GPU scripts (docs/GPU.md): unpacking the carried binaries and
# finding the CUDA libraries they link.

# unpack NAME DIR: gpu-bundle/NAME.xz to DIR/NAME, executable. Python's lzma, since the GPU
# machine may have no xz.
unpack() {
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
    "gpu-bundle/$1.xz" "$2/$1" && chmod +x "$2/$1"
}

# cuBLAS, cuRAND and the runtime come from PyTorch's wheels or the system toolkit; the driver's
# libcuda is already on the loader's path.
cuda_libs=$(python3 - <<'PY'
import glob, os, site
roots = site.getsitepackages() + ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
dirs = []
for lib in ["libcublas.so.13", "libcublasLt.so.13", "libcurand.so.10", "libcudart.so.13"]:
    for r in roots:
        hits = glob.glob(os.path.join(r, "**", lib), recursive=True)
        if hits:
            d = os.path.dirname(hits[0])
            if d not in dirs:
                dirs.append(d)
            break
print(":".join(dirs))
PY
)
export LD_LIBRARY_PATH=$cuda_libs${LD_LIBRARY_PATH:+${cuda_libs:+:}$LD_LIBRARY_PATH}
