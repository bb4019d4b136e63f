#!/usr/bin/env bash
# The package as a user gets it: a wheel built from this checkout, installed (not editable) into a
# fresh virtual environment outside the checkout, run from another folder. arag itself comes from the
# wheel; its dependencies are borrowed from the environment running this script (a .pth line), which
# saves reinstalling torch & co. Builds a tiny index from a JSON Lines file written here, asks one
# question with the scripted backend, evaluates two questions and re-judges them.
#   usage: .ci/installed_package.sh   (with the project's environment active)
set -euo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/arag-installed.XXXXXX")"
trap 'rm -rf "$work"' EXIT

deps_site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# Built from a copy of the files git knows (no stale build/ folder or local leftovers get in).
mkdir "$work/src"
git -C "$checkout" ls-files -z --cached --others --exclude-standard | (cd "$checkout" && xargs -0 tar -c --no-recursion --ignore-failed-read 2>/dev/null) | tar -x -C "$work/src"
python -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$work/dist" "$work/src"
python -m venv "$work/venv"
py="$work/venv/bin/python"
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$deps_site" > "$site/zz-arag-ci-dependencies.pth"  # after the venv's own site-packages: the wheel wins
"$py" -m pip install --quiet --no-deps --no-index "$work"/dist/arag-*.whl

cd "$work"
export PYTHONPATH=  # nothing from the checkout
"$py" - "$site" <<'PY'
import sys
from pathlib import Path

import arag, pipelines
from arag.config.files import conf_dir
from arag.methods import available_methods

site = Path(sys.argv[1]).resolve()
for module in (arag, pipelines):
    assert Path(module.__file__).resolve().is_relative_to(site), f"{module.__name__} comes from {module.__file__}, not the wheel"
assert conf_dir().resolve().is_relative_to(site), conf_dir()
assert "arag_full" in available_methods() and (conf_dir() / "ask.yaml").is_file(), available_methods()
print(f"arag from the wheel: {Path(arag.__file__).parent}; configs: {conf_dir()}; methods: {', '.join(available_methods())}")
PY

cat > corpus.jsonl <<'JSONL'
{"doc_id": "0", "title": "Ermengarde of Tours", "text": "Ermengarde of Tours was the wife of Lothair I. She died on 20 March 851."}
{"doc_id": "1", "title": "Lothair II", "text": "Lothair II was the king of Lotharingia from 855. His mother was Ermengarde of Tours."}
{"doc_id": "2", "title": "Phoolwari", "text": "Phoolwari is a 1946 Indian film. It was directed by Chaturbhuj Doshi."}
JSONL
cat > questions.jsonl <<'JSONL'
{"id": "q0", "question": "When did Lothair II's mother die?", "answers": ["20 March 851"], "supporting_titles": ["Lothair II", "Ermengarde of Tours"]}
{"id": "q1", "question": "When did Ermengarde of Tours die?", "answers": ["20 March 851"], "supporting_titles": ["Ermengarde of Tours"]}
JSONL
script="[{tool:keyword_search,arguments:{keywords:[Ermengarde]}},{tool:chunk_read,arguments:{chunk_ids:['0#0']}},{answer:'20 March 851'}]"

"$py" -m pipelines.index +corpus=jsonl corpus.path=corpus.jsonl index.path=index progress=false runtime.num_cpus=2
"$py" -m pipelines.ask index.path=index model=scripted "model.script=$script" question="When did Lothair II's mother die?" | tee ask.out
grep -q "20 March 851" ask.out
"$py" -m pipelines.evaluate index.path=index questions.path=questions.jsonl results.path=results limit=2 \
    model=scripted model.replay=true "model.script=$script" \
    "judge.model={backend:scripted,protocol:json,model:judge,replay:true,script:[{verdict:correct}]}" \
    runtime.num_cpus=2 runtime.worker_cpus=0.5 progress=false | tee evaluate.out
grep -q "evaluated 2/2 questions: 2 answered" evaluate.out
"$py" -m pipelines.rejudge results.path=results judge=strict \
    "judge.model={backend:scripted,protocol:json,model:judge,replay:true,script:[{verdict:incorrect}]}" progress=false | tee rejudge.out
grep -q "2 answered episodes, 0 judged before, 2 judged now" rejudge.out
echo "installed package: index, ask, evaluate and rejudge ran from the wheel"
