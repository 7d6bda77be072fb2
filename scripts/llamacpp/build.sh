#!/usr/bin/env bash
# A real llama.cpp llama-server for testing infscale against, built from public source: the
# llama-cpp-python sdist (which vendors llama.cpp) from the Python package index, CPU only, no
# web UI, no downloads at build time; and a tiny random-weight GGUF model (2 layers, 17 MB) with
# the tokenizer of the vocab file llama.cpp ships. About 7 minutes on 2 cores. Idempotent.
#   scripts/llamacpp/build.sh [DIR]   (default: target/llamacpp)
# Prints the server binary and the model path.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(realpath -m "${1:-target/llamacpp}")
mkdir -p "$dir"
command -v cmake >/dev/null || pip install -q cmake
python3 -c 'import gguf, numpy' 2>/dev/null || pip install -q gguf numpy
if [ ! -d "$dir/src" ]; then
  pip download -q --no-deps llama-cpp-python==0.3.36 -d "$dir"
  mkdir -p "$dir/src"
  tar -xzf "$dir"/llama_cpp_python-*.tar.gz -C "$dir/src" --strip-components=1
fi
llama="$dir/src/vendor/llama.cpp"
if [ ! -x "$dir/build/bin/llama-server" ]; then
  cmake -S "$llama" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
  nice -n 10 cmake --build "$dir/build" --target llama-server -j2 >/dev/null
fi
if [ ! -f "$dir/tiny.gguf" ]; then
  python3 scripts/llamacpp/make-tiny-gguf.py --out "$dir/tiny.gguf" \
    --vocab "$llama/models/ggml-vocab-llama-spm.gguf" >/dev/null
fi
echo "$dir/build/bin/llama-server"
echo "$dir/tiny.gguf"
