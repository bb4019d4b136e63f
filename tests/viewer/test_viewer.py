"""The results viewer (arag.viewer) over a results tree of real rows (EpisodeRunner with the
scripted backend, no Ray): the first page lists runs and episodes and filters them, an episode page
shows every step with gold evidence marked and the verdict, a question across runs, model output
escaped, and the entry point's errors. The headless-browser test is test_viewer_browser.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from arag.evaluation.questions import Question
from arag.evaluation.results import RunStore, find_run_dirs, read_row
from arag.evaluation.runner import EpisodeRunner
from arag.evaluation.run_settings import RunSettings
from arag.viewer.gold import TITLES_FROM_TEXT, TITLES_MISSING, TITLES_RECORDED
from arag.viewer.pages import macro, steps_html
from arag.evaluation.episode_facts import trajectory_facts
from arag.llm.scripted import ScriptedBackend
from tests.support.scripted_evaluation import CONF, QUESTIONS
from tests.evaluation.test_runner import settings as runner_settings
from tests.support.paired_tables import viewer_pairs
from tests.support.tiny_index import fake_encode

REPO = Path(CONF).parent
INJECTED = '<img src=x onerror="alert(1)"><script>document.title="pwned"</script>Lothair'


class Dom(HTMLParser):
    """The elements of a page: (tag, attributes, text inside), in document order."""

    VOID = {"meta", "br", "img", "input", "hr", "link", "wbr"}

    def __init__(self, page: str):
        super().__init__()
        self.elements: list[list] = []
        self._open: list[list] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        element = [tag, dict(attrs), ""]
        self.elements.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_endtag(self, tag):
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                del self._open[i:]
                break

    def handle_data(self, data):
        for element in self._open:
            element[2] += data

    def having(self, cls: str | None = None, tag: str | None = None) -> list[tuple[str, dict, str]]:
        return [(t, a, x) for t, a, x in self.elements if (cls is None or cls in (a.get("class") or "").split()) and (tag is None or t == tag)]

    def text(self) -> str:
        """All the page's text, markup removed and entities decoded."""
        return self.having(tag="body")[0][2]

    def by_id(self, id_: str) -> str:
        (found,) = [x for _, a, x in self.elements if a.get("id") == id_]
        return found


def settings(max_steps: int, verdict: str, method: str = "arag_full") -> RunSettings:
    return runner_settings(method, agent={"max_steps": max_steps}, judge_model={"backend": "scripted", "protocol": "json", "model": "judge", "replay": True, "script": [{"verdict": verdict}]})


def store(root: Path, s: RunSettings, rows: list[dict]) -> str:
    with RunStore(root, s.run_id) as run:
        run.write_run_info({"run_id": s.run_id, "created": "2026-11-26T00:00:00", "identity": s.identity(), "settings": s.to_json()})
        run.write(rows)
    return s.run_id


# A chunk_read as runs stored it before failure kinds and unknown-id counts were recorded: nothing
# read, the result naming the unknown ids, no `failure` key (as in the committed CPU runs).
LEGACY_UNKNOWN_IDS = {"step": 1, "name": "chunk_read", "arguments": {"chunk_ids": ["9#9", "9#8"]}, "text": 'Unknown chunk ids (not in this index): ["9#9", "9#8"]',
                      "retrieved_tokens": 0, "latency_s": 0.0, "error": None, "chunk_ids": []}
# AgenticRAG: search twice alike (a repeated call), open an id no search gave (an unknown reference
# id), open Ermengarde's document, answer wrongly (judged incorrect after seeing gold evidence).
SCRIPT_C = [
    {"tool": "search", "arguments": {"queries": ["Ermengarde of Tours"]}},
    {"tool": "search", "arguments": {"queries": ["Ermengarde of Tours"]}},
    {"tool": "open", "arguments": {"ref_id": "turn9search9"}},
    {"tool": "open", "arguments": {"ref_id": "turn1search1"}},
    {"answer": "869\nCitations: turn1search1 (0.9)"},
]


@pytest.fixture(scope="module")
def tree(eval_index, tmp_path_factory):
    """Three runs under results/bench/: A (arag_full) reads Ermengarde's chunk and answers (judged
    correct); B has one step (a forced answer carrying markup, judged incorrect), a failed episode,
    its q0 stored as before trajectories kept their chunks' titles and its q1 with a chunk_read of
    unknown ids as stored before failure kinds; C (agenticrag) searches documents, repeats a call,
    opens an unknown reference id and answers wrongly, its q0 stored without chunk titles."""
    from arag.tools import ToolContext

    root = tmp_path_factory.mktemp("viewer") / "results"
    questions = [Question.from_json(q) for q in QUESTIONS[:3]]
    script_a = [{"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}}, {"tool": "chunk_read", "arguments": {"chunk_ids": ["2#0"]}}, {"answer": "20 March 851"}]
    script_b = [{"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}}, {"answer": INJECTED}]
    with ToolContext(eval_index.path, encoder=fake_encode) as ctx:
        a, b, c = settings(4, "correct"), settings(1, "incorrect"), settings(8, "incorrect", "agenticrag")
        runner_a = EpisodeRunner(a, backend=ScriptedBackend(script_a, replay=True), ctx=ctx)
        runner_b = EpisodeRunner(b, backend=ScriptedBackend(script_b, replay=True), ctx=ctx)
        runner_c = EpisodeRunner(c, backend=ScriptedBackend(SCRIPT_C, replay=True), ctx=ctx)
        rows_a = [asyncio.run(runner_a.run(q)).to_record() for q in questions]
        rows_b = [asyncio.run(runner_b.run(q)).to_record() for q in questions[:2]]
        rows_b.append(runner_b.failed_row(questions[2], "episode timed out after 5s").to_record())
        rows_c = [asyncio.run(runner_c.run(q)).to_record() for q in questions[:2]]
    old = json.loads(rows_b[0]["trajectory"])
    for call in old["tool_calls"]:  # the search results' headers of then, which named the titles
        for chunk_id, title in old["chunk_titles"].items():
            call["text"] = call["text"].replace(f"Chunk ID: {chunk_id},", f"[1] chunk_id: {chunk_id} | title: {title} | score: 8\n")
    del old["chunk_titles"]
    rows_b[0]["trajectory"] = json.dumps(old)
    legacy = json.loads(rows_b[1]["trajectory"])
    legacy["tool_calls"].append(LEGACY_UNKNOWN_IDS)
    rows_b[1]["trajectory"] = json.dumps(legacy)
    untitled = json.loads(rows_c[0]["trajectory"])
    del untitled["chunk_titles"]
    rows_c[0]["trajectory"] = json.dumps(untitled)
    return {"root": root, "a": store(root / "bench", a, rows_a), "b": store(root / "bench", b, rows_b), "c": store(root / "bench", c, rows_c)}


@pytest.fixture(scope="module")
def client(tree):
    from starlette.testclient import TestClient

    from arag.viewer import create_app

    with TestClient(create_app(tree["root"])) as c:
        yield c


def get(client, url: str, status: int = 200) -> Dom:
    response = client.get(url)
    assert response.status_code == status, response.text
    return Dom(response.text)


def problems(dom: Dom) -> list[str]:
    return [x for _, _, x in dom.having("problem")]


def listed(dom: Dom) -> set[tuple[str, str]]:
    """(run id, question id) of the episode rows on the first page."""
    out = set()
    for _, attrs, _ in dom.having(tag="a"):
        link = attrs.get("href", "")
        if link.startswith("/episode?"):
            from urllib.parse import parse_qs, urlsplit

            q = parse_qs(urlsplit(link).query)
            out.add((q["run"][0], q["q"][0]))
    return out


def test_the_results_module_finds_nested_runs_and_reads_rows_by_question(tree):
    assert [p.name for p in find_run_dirs(tree["root"])] == sorted([tree["a"], tree["b"], tree["c"]])
    store_b = RunStore.at(tree["root"] / "bench" / tree["b"])
    by_file = store_b.read_rows_by_file(["question_id"])
    assert sorted(r["question_id"] for _, rows in by_file for r in rows) == ["q0", "q1", "q2"]
    file, rows = by_file[-1]
    assert read_row(file, len(rows) - 1)["question_id"] == rows[-1]["question_id"] and read_row(file, 0)["trajectory"] is not None
    assert store_b.read_invocations() == []  # written by pipelines.evaluate only
    assert store_b.read_info()["run_id"] == tree["b"]
    rows = store_b.read_rows(["question_id", "status", "no_such_column"])
    assert sorted((r["question_id"], r["status"], r["no_such_column"]) for r in rows) == [("q0", "ok", None), ("q1", "ok", None), ("q2", "failed", None)]
    (failed,) = store_b.read_rows(question_id="q2")
    assert failed["failure"] == "episode timed out after 5s" and failed["prediction"] is None
    with pytest.raises(FileNotFoundError, match="no results folder"):
        find_run_dirs(tree["root"] / "nope")


def test_the_first_page_lists_runs_and_episodes_and_the_filters_narrow_them(client, tree):
    a, b, c = tree["a"], tree["b"], tree["c"]
    dom = get(client, "/")
    arag_full = {(a, "q0"), (a, "q1"), (a, "q2"), (b, "q0"), (b, "q1"), (b, "q2")}
    assert listed(dom) == arag_full | {(c, "q0"), (c, "q1")}
    # The paired comparisons are a page of their own (they read every run's files again), linked from here.
    assert [x for _, _, x in dom.having(tag="h2")] == ["Runs (3)", "Episodes (8 of 8)"] and dom.by_id("paired-link") == "paired comparisons of these runs"
    correct = get(client, "/?outcome=correct")
    assert listed(correct) == {(a, "q0"), (a, "q1"), (a, "q2")}
    assert [x for _, _, x in correct.having(tag="h2")] == ["Episodes (3 of 8)", "Runs (3)"]  # a filtered listing: its episodes first
    assert listed(get(client, "/?outcome=wrong")) == {(b, "q0"), (b, "q1"), (c, "q0"), (c, "q1")}
    assert listed(get(client, "/?outcome=failed")) == {(b, "q2")}
    assert listed(get(client, "/?forced=yes")) == {(b, "q0"), (b, "q1")}
    assert listed(get(client, "/?method=arag_full&dataset=bench")) == arag_full
    assert listed(get(client, "/?method=naive_rag")) == set()
    assert problems(get(client, "/?outcome=maybe", 400)) == ["outcome='maybe' is not one of correct, wrong, unjudged, failed"]


def test_an_episode_page_shows_each_step_the_gold_chunks_and_the_verdict(client, tree):
    dom = get(client, f"/episode?run={tree['a']}&q=q0")
    tools = [a["data-tool"] for _, a, _ in dom.having("tool-call")]
    assert tools == ["keyword_search", "chunk_read"]
    assert [x for _, _, x in dom.having("arguments")] == ['{"keywords": ["Lothair"]}', '{"chunk_ids": ["2#0"]}']
    results = [x for _, _, x in dom.having("result")]
    assert "Lothair II" in results[0] and "She died on 20 March 851." in results[1]
    gold = [x for _, _, x in dom.having("gold", tag="span")]
    # q0's evidence: Lothair II (chunks 1#0, 1#1: keyword search found them) and Ermengarde of Tours (2#0).
    assert any("2#0" in g and "Ermengarde of Tours" in g for g in gold) and any("1#0" in g and "Lothair II" in g for g in gold)
    assert {x for _, _, x in dom.having("gold", tag="mark")} >= {"2#0", "1#0"}  # marked inside the tool results too
    assert not any("0#0" in g for g in gold)  # Teutberga's chunk is not evidence for q0
    assert "correct" in dom.by_id("verdict") and dom.by_id("prediction") == "20 March 851"
    replies = [x for _, _, x in dom.having("reply")]
    assert len(replies) == 3 and "20 March 851" in replies[-1]
    assert [x for t, _, x in dom.having(tag="h2") if x.startswith("Step")] == ["Step 1", "Step 2", "Step 3"]


def test_a_forced_answer_a_failure_and_model_markup_are_shown_as_text(client, tree):
    response = client.get(f"/episode?run={tree['b']}&q=q0")
    dom = Dom(response.text)
    assert not dom.having(tag="script") and not dom.having(tag="img")  # the model's markup is text
    assert dom.by_id("prediction") == INJECTED
    assert "incorrect" in dom.by_id("verdict") and "forced: max_steps" in dom.text()
    assert any("forced answer (max_steps)" in x for _, _, x in dom.having("model-call"))
    index = client.get("/?run=" + tree["b"]).text
    assert "<script>" not in index and "&lt;script&gt;" in index
    failed = get(client, f"/episode?run={tree['b']}&q=q2")
    assert problems(failed) == ["episode timed out after 5s"] and "no answer: not judged" in failed.by_id("verdict")
    # q0 of run B stored no chunk titles: they come from the tool result's chunk headers.
    assert TITLES_FROM_TEXT in dom.text() and any("1#0" in x and "Lothair II" in x for _, _, x in dom.having("gold", tag="span"))
    assert TITLES_MISSING in failed.text()  # a failed row has no trajectory


def test_one_question_across_runs_side_by_side(client, tree):
    dom = get(client, "/compare?dataset=bench&q=q0")
    columns = dom.having("run-column")
    assert len(columns) == 3
    assert "agenticrag" in columns[0][2] and "max_steps 1" in columns[1][2] and "max_steps 4" in columns[2][2]  # in run order: method, then fewer steps first
    assert [a["data-tool"] for _, a, _ in dom.having("tool-call")] == ["search", "search", "open", "open", "keyword_search", "keyword_search", "chunk_read"]


def test_every_accuracy_carries_its_n_and_interval_and_the_two_runs_are_paired(client, tree):
    """Run A: 3 of 3 correct; run B: 2 judged incorrect and 1 failed (never scored: named beside its
    accuracies). Each accuracy shown carries its 95% Wilson interval and n; the two runs are compared
    on the 2 questions both scored."""
    dom = get(client, "/")
    llm = [x for _, _, x in dom.having("llm-acc")]
    assert llm[1:] == ["0.0% [0.0, 65.8] n=2 · 1 failed (episode timed out after 5s)", "100.0% [43.9, 100.0] n=3"]  # run order: C (agenticrag), B (1 step), A
    contain = [x for _, _, x in dom.having("contain-acc")]
    assert len(contain) == len(llm) >= 3 and all(" n=" in x and "[" in x for x in contain)
    # A is run B (1 step, the smaller setting), B is run A (4 steps): on 2 shared scored questions 0.0
    # against 100.0, Δ (A − B) −100 points, right only in A / B 0 / 2, exact McNemar p = 2 · ½².
    assert viewer_pairs(client.get("/paired").text) == {
        (tree["b"], tree["a"], "LLM-Acc"): ("2", "0.0", "100.0", "-100.0", "[-100.0, -100.0]", "0 / 2", "0.500", "within noise"),
        (tree["b"], tree["a"], "Cont-Acc"): ("2", "0.0", "50.0", "-50.0", "[-100.0, +0.0]", "0 / 1", "1.000", "within noise"),  # one of A's answers holds the gold
    }
    side = get(client, "/compare?dataset=bench&q=q0")
    assert [x for _, _, x in side.having("run-accuracy")][1].startswith("run LLM-Acc 0.0% [0.0, 65.8] n=2 · 1 failed (episode timed out after 5s) · Contain-Acc ")
    assert "100.0% [43.9, 100.0] n=3" in side.having("run-accuracy")[2][2]


def test_a_lookup_or_value_error_from_a_bug_is_a_server_error_not_a_refused_request(tree, monkeypatch):
    """Only the viewer's own refusals (arag.viewer.errors) are 404/400 pages: a KeyError or a
    ValueError raised by a page's code is a 500, never "no such run" or "a value refused"."""
    from starlette.testclient import TestClient

    import arag.viewer.pages as pages
    from arag.viewer import create_app

    for error in (KeyError("trajectory"), ValueError("invalid literal for int()")):
        def broken(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(pages, "episode_page", broken)
        with TestClient(create_app(tree["root"]), raise_server_exceptions=False) as client:
            assert client.get(f"/episode?run={tree['a']}&q=q0").status_code == 500
            assert client.get("/episode?run=nope&q=q0").status_code == 404  # the refusal itself is unchanged


def test_unknown_runs_and_questions_are_404_with_the_reason(client, tree):
    assert problems(get(client, "/episode?run=nope&q=q0", 404)) == [f"no run 'nope' under {tree['root']}"]
    assert problems(get(client, f"/episode?run={tree['a']}&q=q9", 404)) == [f"run {tree['a']} has no episode of question 'q9'"]
    assert problems(get(client, "/compare?dataset=bench&q=q9", 404)) == ["no run of dataset 'bench' has question 'q9'"]


@pytest.mark.parametrize(
    "override, message",
    [
        ("+view.prot=1", "unknown setting view.prot (did you mean view.port?)"),
        ("view.port=http", "setting view.port: Value 'http' of type 'str' could not be converted to Integer"),  # ViewConfig's type
        ("view.port=70000", "view.port must be a port number"),
        ("view.open_browser=maybe", "setting view.open_browser: Value 'maybe' is not a valid bool"),
        ("results.path=/no/such/results", "no results folder at /no/such/results"),
    ],
)
def test_the_command_names_bad_settings_in_one_line(override, message):
    done = subprocess.run([sys.executable, "-m", "pipelines.view", override], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


# ---- gold marks for every method, tool errors, repeated calls ---------------------------------------
def test_agenticrag_results_mark_their_gold_documents_whether_titles_were_recorded_or_not(client, tree):
    """C's q0 was stored without chunk titles (as the committed AgenticRAG runs were): they are read
    from the search results' "[ref] | title: …" headers and the chunks an open of that reference
    returned; gold chunks get ★ chips and the gold document's reference id is marked in the results."""
    for q in ("q0",):
        dom = get(client, f"/episode?run={tree['c']}&q={q}")
        assert TITLES_FROM_TEXT in dom.by_id("evidence")
        gold = [x for _, _, x in dom.having("gold", tag="span")]
        assert any("2#0" in g and "Ermengarde of Tours" in g for g in gold) and any("1#0" in g and "Lothair II" in g for g in gold)
        assert "turn1search1" in {x for _, _, x in dom.having("gold", tag="mark")}
        assert [x for _, _, x in dom.having("gold-wrong")] == ["gold seen but wrong"]  # judged incorrect after opening Ermengarde's document
        assert any("turn1search1" in x for _, _, x in dom.having("gold-refs"))
    recorded = get(client, f"/episode?run={tree['c']}&q=q1")  # titles recorded: the search's snippets of both films
    assert TITLES_RECORDED in recorded.by_id("evidence")
    assert {g.split(" · gold: ")[1] for _, _, g in recorded.having("gold", tag="span")} == {"Phoolwari", "Aas Ka Panchhi"}


def test_the_compare_page_marks_gold_in_every_column(client, tree):
    """One column per run (AgenticRAG's C, A-RAG's B and A), each with its gold chunks marked."""
    parts = client.get("/compare?dataset=bench&q=q0").text.split('class="box run-column"')[1:]
    assert len(parts) == 3 and all('class="chunk gold"' in part for part in parts)
    assert "turn1search1" in {x for _, _, x in Dom("<body>" + parts[0]).having("gold", tag="mark")}


def test_tool_errors_and_repeated_calls_are_styled_as_such(client, tree):
    c = get(client, f"/episode?run={tree['c']}&q=q0")
    calls = c.having("tool-call")
    classes = [set(a["class"].split()) for _, a, _ in calls]
    assert [a["data-tool"] for _, a, _ in calls] == ["search", "search", "open", "open"]
    assert "repeated" in classes[1] and "repeated" not in classes[0]
    assert "unusable" in classes[2] and "tool error: unknown ids" in calls[2][2]  # an id no search gave
    assert c.by_id("tool-errors") == "1 (unknown ids 1) · 1"
    legacy = get(client, f"/episode?run={tree['b']}&q=q1")  # stored before failure kinds: inferred from the result
    (call,) = [(a, x) for _, a, x in legacy.having("tool-call") if a["data-tool"] == "chunk_read"]
    assert {"unusable", "unknown-ids"} <= set(call[0]["class"].split()) and "tool error: unknown ids" in call[1]
    assert [x for _, _, x in legacy.having("error-line")] == ['Unknown chunk ids (not in this index): ["9#9", "9#8"]']
    listing = get(client, f"/?run={tree['b']}")
    errors = {a.get("data-q"): x for _, a, x in listing.having("episode")}
    assert [x for _, _, x in listing.having("has-errors")] == ["1"] and "q1" in errors


def test_a_result_identical_to_an_earlier_one_is_folded_with_a_note():
    """The same keyword search twice, then another: the second result is the first one again, shown
    folded (closed, one click away) under a note naming where it was first shown."""
    def call(step: int, keyword: str, text: str) -> dict:
        return {"step": step, "name": "keyword_search", "arguments": {"keywords": [keyword]}, "text": text, "chunk_ids": ["1#0"], "failure": None}

    t = {"tool_calls": [call(1, "Lothair", "Chunk ID: 1#0, Lothair II"), call(2, "Lothair", "Chunk ID: 1#0, Lothair II"), call(3, "Tours", "Chunk ID: 2#0, Ermengarde")]}
    dom = Dom(steps_html(t, trajectory_facts(t, []), {}, {}, {}))
    shown = "result shown to the model"
    assert [x for _, _, x in dom.having(tag="summary")] == [shown, f"{shown}: identical to the result of step 1's keyword_search (folded)", shown]
    assert [("open" in a, a.get("class")) for _, a, _ in dom.having(tag="details")] == [(True, None), (False, "folded"), (True, None)]
    assert [x for _, _, x in dom.having("result")] == ["Chunk ID: 1#0, Lothair II", "Chunk ID: 1#0, Lothair II", "Chunk ID: 2#0, Ermengarde"]


def test_the_compare_columns_set_the_judges_verdict_beside_contain_acc(client, tree):
    side = get(client, "/compare?dataset=bench&q=q0")
    # In run order: C (agenticrag: 869, incorrect), B (one step: the injected markup, incorrect), A (20 March 851, correct).
    assert [x for _, _, x in side.having("verdict-contain")] == ["judge: incorrect · Contain-Acc 0", "judge: incorrect · Contain-Acc 0", "judge: correct · Contain-Acc 1"]
    # A judge that calls a prediction holding the gold answer wrong stands out.
    disagreeing = Dom(macro("verdict_beside_contain")({"status": "ok", "llm_acc": 0.0, "contain_acc": 1.0}))
    assert [(set(a["class"].split()), x) for _, a, x in disagreeing.elements] == [({"verdict-contain", "disagree"}, "judge: incorrect · Contain-Acc 1 · they disagree")]
    assert macro("verdict_beside_contain")({"status": "failed", "llm_acc": 0.0, "contain_acc": 0.0}).endswith(">failed: not scored</span>")


def test_the_filters_on_evidence_tool_errors_repeats_and_gold_seen_but_wrong(client, tree):
    a, b, c = tree["a"], tree["b"], tree["c"]
    assert listed(get(client, "/?tool_errors=yes")) == {(b, "q1"), (c, "q0"), (c, "q1")}
    assert listed(get(client, "/?repeated=yes")) == {(c, "q0"), (c, "q1")}
    assert listed(get(client, "/?gold_wrong=yes")) == {(b, "q0"), (c, "q0"), (c, "q1")}
    assert listed(get(client, "/?evidence=read")) == {(a, "q0"), (c, "q0")}
    assert listed(get(client, "/?evidence=none")) == {(a, "q1"), (b, "q1")}
    assert listed(get(client, "/?evidence=seen_not_read")) == {(a, "q2"), (b, "q0"), (c, "q1")}
    assert listed(get(client, "/?evidence=seen&outcome=wrong")) == {(b, "q0"), (c, "q0"), (c, "q1")}
    assert problems(get(client, "/?evidence=maybe", 400)) == ["evidence='maybe' is not one of seen, read, seen_not_read, none"]


def test_text_search_covers_questions_predictions_and_trajectories(client, tree):
    a, c = tree["a"], tree["c"]
    assert listed(get(client, f"/?run={a}&q=PHOOLWARI")) == {(a, "q1")}  # the question only
    assert listed(get(client, f"/?run={c}&q=869")) == {(c, "q0"), (c, "q1")}  # C's prediction
    assert listed(get(client, f"/?run={a}&q=lotharingia")) == {(a, "q0"), (a, "q1"), (a, "q2")}  # only in the keyword search's results


def test_columns_sort_both_ways_and_bad_sorts_are_named(client, tree):
    up = get(client, "/?sort=steps")
    steps = [int(x) for _, _, x in up.having("steps") if x]
    assert steps == sorted(steps) and len(set(steps)) > 1
    (heading,) = [(a, x) for _, a, x in up.having(tag="th") if a.get("data-sort") == "steps"]
    assert heading[0]["aria-sort"] == "ascending"
    toggle = [a["href"] for _, a, _ in up.having(tag="a") if a.get("href", "").startswith("/?sort=steps")]
    assert toggle and "order=desc" in toggle[0]
    down = [int(x) for _, _, x in get(client, "/?sort=steps&order=desc").having("steps") if x]
    assert down == sorted(steps, reverse=True)
    failed_last = [a.get("data-q") for _, a, _ in get(client, "/?sort=retrieved&order=desc").having("episode")]
    assert failed_last[-1] == "q2"  # B's failed episode has no retrieved tokens: missing values last
    assert problems(get(client, "/?sort=colour", 400))[0].startswith("sort='colour' is not one of run, question")


def test_the_listed_episodes_export_as_csv_and_json(client, tree):
    import csv
    import io

    listed_wrong = listed(get(client, "/?outcome=wrong"))
    response = client.get("/export?outcome=wrong&format=csv")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    assert 'filename="episodes.csv"' in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert {(r["run_id"], r["question_id"]) for r in rows} == listed_wrong and {r["outcome"] for r in rows} == {"wrong"}
    records = client.get("/export?outcome=wrong&format=json&sort=steps").json()
    assert {(r["run_id"], r["question_id"]) for r in records} == listed_wrong
    assert [r["steps"] for r in records] == sorted(r["steps"] for r in records)
    assert {r["question_id"]: r["gold_seen_but_wrong"] for r in records if r["run_id"] == tree["b"]} == {"q0": True, "q1": False}
    page = get(client, "/?outcome=wrong")
    assert [a["href"] for _, a, _ in page.having("export")] == ["/export?outcome=wrong&amp;format=csv".replace("&amp;", "&"), "/export?outcome=wrong&format=json"]
    assert problems(get(client, "/export?format=xml", 400)) == ["format='xml' is not csv or json"]


# ---- run identity, figures, settings, report ---------------------------------------------------------
def test_the_runs_table_and_compare_headers_show_each_runs_identity(client, tree):
    from arag.evaluation.run_settings import code_version

    commit = (code_version()["commit"] or "?")[:7]
    dom = get(client, "/")
    rows = {a["data-run"]: x for _, a, x in dom.having("run", tag="tr")}
    assert set(rows) == {tree["a"], tree["b"], tree["c"]}
    assert [x for _, _, x in dom.having("judge", tag="td")] == ["judge (preset paper)"] * 3
    assert [x for _, _, x in dom.having("commit", tag="td")] == [commit] * 3
    rails = [x for _, _, x in dom.having("guard-rails", tag="td")]
    assert len(rails) == 3 and all(rails)
    side = get(client, "/compare?dataset=bench&q=q0")
    assert [x for _, _, x in side.having("judge", tag="span")] == ["judge (preset paper)"] * 3
    assert [x for _, _, x in side.having("commit", tag="span")] == [commit] * 3


def test_a_runs_page_shows_its_figures_with_intervals_and_links_its_settings_and_report(client, tree):
    a = tree["a"]
    dom = get(client, f"/run?run={a}")
    values = {attrs["data-metric"]: x for _, attrs, x in dom.having("figure", tag="tr")}
    assert "100.0% [43.9, 100.0] n=3" in values["llm_acc"]
    assert "mean 3.0 [3.0, 3.0] n=3" in values["steps"]  # search, read, answer: 3 steps each
    assert "n=3" in values["retrieved_tokens"] and dom.having("histogram") and dom.having("interval-bar")
    mix = {attrs["data-tool"]: x for _, attrs, x in dom.having("tool", tag="tr")}
    assert set(mix) == {"keyword_search", "chunk_read"} and all("3 calls · 50.0%" in x for x in mix.values())
    links = [x["href"] for _, x, _ in dom.having(tag="a")]
    assert f"/settings?run={a}" in links and "no report yet" in dom.text()
    settings_page = get(client, f"/settings?run={a}")
    assert json.loads(settings_page.by_id("run-json"))["run_id"] == a
    assert problems(get(client, f"/report?run={a}", 404))[0].startswith(f"no report/report.md beside run {a}")
    # Run B's failed episode is left out of its accuracies and counted apart.
    b = get(client, f"/run?run={tree['b']}")
    assert {attrs["data-metric"]: x for _, attrs, x in b.having("value", tag="td")}["llm_acc"] == "0.0% [0.0, 65.8] n=2"
    assert "(a failed episode has no result and is never scored; 1 failed)" in b.text()


def test_the_report_nearest_a_run_is_linked_and_shown_with_its_plots(tree, tmp_path):
    import shutil

    from starlette.testclient import TestClient

    from arag.viewer import create_app

    root = tmp_path / "results"
    shutil.copytree(tree["root"] / "bench" / tree["a"], root / "bench" / tree["a"])
    (root / "report").mkdir()
    (root / "report" / "report.md").write_text("# Evaluation report\n\n| method | LLM-Acc |\n")
    (root / "report" / "accuracy.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    with TestClient(create_app(root)) as client:
        run_page = get(client, f"/run?run={tree['a']}")
        assert f"/report?run={tree['a']}" in [a["href"] for _, a, _ in run_page.having(tag="a")]
        report = get(client, f"/report?run={tree['a']}")
        assert report.by_id("report").startswith("# Evaluation report")
        (src,) = [a["src"] for _, a, _ in report.having(tag="img")]
        assert client.get(src).content == b"\x89PNG\r\n\x1a\n"
        assert client.get(f"/report/file?run={tree['a']}&name=../report/report.md").status_code == 404


def test_a_rerun_is_seen_on_the_next_page(tree, tmp_path):
    """The kept runs are keyed by their files' names, sizes and times: a part written after the first
    page (an evaluation still running, a rerun) shows on the next one, and its episode opens."""
    import shutil

    from starlette.testclient import TestClient

    from arag.viewer import create_app

    root = tmp_path / "results"
    shutil.copytree(tree["root"] / "bench" / tree["a"], root / tree["a"])
    with TestClient(create_app(root)) as client:
        assert {q for _, q in listed(get(client, "/"))} == {"q0", "q1", "q2"}
        (row,) = RunStore.at(root / tree["a"]).read_rows(question_id="q0")
        with RunStore(root, tree["a"]) as store:
            store.write([{**row, "question_id": "q9", "question": "A question asked later?"}])
        assert {q for _, q in listed(get(client, "/"))} == {"q0", "q1", "q2", "q9"}
        assert get(client, f"/episode?run={tree['a']}&q=q9").having(tag="h1")[0][2] == "A question asked later?"


# ---- the committed CPU runs (benchmarks/cpu_evaluations/results/novel: this test reads that tree) ----
COMMITTED_NOVEL = REPO / "benchmarks" / "cpu_evaluations" / "results" / "novel"


def test_on_the_committed_novel_runs_every_agenticrag_episode_that_saw_gold_marks_it(tmp_path):
    """The committed AgenticRAG runs (e9a0079474b562ed and its re-judged copy c091414684ab2bda)
    recorded no chunk titles: every episode whose evidence recall counts a seen document marks it,
    the compare page marks gold in every column, and the re-judged run shows its origin, judge and commits."""
    from starlette.testclient import TestClient

    from arag.viewer import create_app

    with TestClient(create_app(COMMITTED_NOVEL)) as client:
        runs = {a["data-run"]: x for _, a, x in get(client, "/").having("run", tag="tr")}
        assert {"e9a0079474b562ed", "c091414684ab2bda", "dbf1a07ee4f9177e"} <= set(runs)
        for run in ("e9a0079474b562ed", "c091414684ab2bda"):
            rows = RunStore.at(COMMITTED_NOVEL / run).read_rows(["question_id", "evidence_seen"])
            for r in rows:
                dom = get(client, f"/episode?run={run}&q={r['question_id']}")
                assert bool(dom.having("gold", tag="span")) == bool(r["evidence_seen"]), (run, r["question_id"])
        index = get(client, "/")
        rejudged = [(a["data-run"], x) for _, a, x in index.having("run", tag="tr") if a["data-run"] == "c091414684ab2bda"][0][1]
        assert "e9a0079474b562ed" in rejudged and "a6d0e5c (judged at 0e139c3)" in rejudged and "qwen2.5-coder-1.5b-instruct (preset paper)" in rejudged
        qid = RunStore.at(COMMITTED_NOVEL / "e9a0079474b562ed").read_rows(["question_id"])[0]["question_id"]
        page = client.get(f"/compare?dataset=graphrag-bench-novel-docs&q={qid}").text
        parts = page.split('class="box run-column"')[1:]
        assert len(parts) == 4 and all('class="chunk gold"' in part for part in parts)
