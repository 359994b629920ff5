"""The client against a live Quorum server, every RPC family: health, Inference, Databases and
Text2Sql, the bearer token, and the retry after RESOURCE_EXHAUSTED.

The server is the one `scripts/http_api_test.sh` starts: Qwen2.5-Coder-0.5B with the `rep-s2`
adapter on one of two generators, one text-to-SQL run at a time and none waiting (so that a
second run is refused with the server's pushback), the Spider database concert_singer, and a
bearer token. QUORUM_TARGET and QUORUM_TOKEN name it; without them the tests fail.
"""

import contextlib
import io
import pathlib
import re
import threading

import grpc
import pytest

from quorum_client import Client, QuorumError, Rows, pb

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def quorum(target: str, token: str):
    with Client(target, token=token, timeout=120) as client:
        client.wait_ready(timeout=300)
        yield client


def greedy(max_tokens: int) -> pb.inference_pb2.SamplingOptions:
    return pb.inference_pb2.SamplingOptions(temperature=0.0, max_tokens=max_tokens)


def test_health_reports_each_service(quorum: Client) -> None:
    assert quorum.health() == "SERVING"
    assert quorum.health("quorum.v1.Text2Sql") == "SERVING"
    assert quorum.health("liveness") == "SERVING"


def test_a_wrong_token_is_refused(target: str) -> None:
    with Client(target, token="not-the-token") as stranger:
        with pytest.raises(QuorumError) as refused:
            stranger.list_models()
    assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_models_name_the_generators_adapters(quorum: Client) -> None:
    listed = quorum.list_models()
    names = [m.name for m in listed.models]
    assert "qwen2.5-coder-0.5b" in names, names
    coder = next(m for m in listed.models if m.name == "qwen2.5-coder-0.5b")
    assert "rep-s2" in coder.adapters
    adapters = {g.name: g.adapter for g in listed.generators}
    assert adapters == {"qwen-rep": "rep-s2", "qwen-ddl": ""}, adapters
    assert listed.selector.model == "qwen2.5-coder-0.5b"


def test_generate_streams_text_and_usage(quorum: Client) -> None:
    messages = list(
        quorum.generate_stream(messages=[("user", "Write SQL that counts the rows of table singer.")],
                               sampling=greedy(12))
    )
    text = "".join(m.text for m in messages)
    assert text.strip(), messages
    last = messages[-1]
    assert last.finish_reason in (pb.inference_pb2.FINISH_REASON_STOP, pb.inference_pb2.FINISH_REASON_LENGTH)
    assert 1 <= last.usage.completion_tokens <= 12
    # The adapter is a request option.
    adapted = quorum.generate("SELECT count(*) FROM", adapter="rep-s2", sampling=greedy(4))
    assert adapted.strip()


def test_tokenize_counts_tokens(quorum: Client) -> None:
    tokens = quorum.tokenize("SELECT count(*) FROM singer")
    assert len(tokens.token_ids) == len(tokens.tokens) >= 5
    assert tokens.max_model_len > 0


def test_databases_are_listed_and_described(quorum: Client) -> None:
    listed = quorum.list_databases()
    assert "concert_singer" in [d.db_id for d in listed.databases]
    assert listed.note == ""
    schema = quorum.describe("concert_singer")
    assert {"singer", "concert", "stadium"} <= {t.name for t in schema.tables}
    with pytest.raises(QuorumError) as missing:
        quorum.describe("no_such_db")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND


def test_ask_answers_with_its_evidence(quorum: Client) -> None:
    answer = quorum.ask("concert_singer", "How many singers do we have?")
    assert "count" in answer.sql.lower(), answer.sql
    assert answer.preview.rows[0].values[0].integer == 6
    assert len(answer.candidates) >= 2
    assert {c.model for c in answer.candidates} >= {"qwen-rep"}
    settings = {s.name: s.value for s in answer.settings}
    assert "adapter=rep-s2" in settings["generator.qwen-rep"], settings


def test_ask_stream_ends_with_the_answer(quorum: Client) -> None:
    kinds = [e.WhichOneof("event") for e in quorum.ask_stream("concert_singer", "List the names of all singers.")]
    assert kinds[0] == "pre_sql" and kinds[-1] == "answer", kinds


def test_subtasks_link_and_explain(quorum: Client) -> None:
    linked = quorum.link_schema("concert_singer", "How many singers are older than 40?")
    assert "singer" in [t.name for t in linked.tables], linked
    explained = quorum.explain("concert_singer", "SELECT count(*) FROM singer")
    assert explained.explanation.strip()


def test_notes_are_added_edited_told_and_removed(quorum: Client) -> None:
    note = quorum.add_note("concert_singer", "A singer's age is in years.")
    assert note.id >= 1
    edited = quorum.edit_note("concert_singer", note.id, "A singer's age is in whole years.")
    assert edited.text == "A singer's age is in whole years."
    assert [n.id for n in quorum.notes("concert_singer").notes].count(note.id) == 1
    answer = quorum.ask("concert_singer", "How many singers are older than 40?")
    assert any(n.id == note.id for n in answer.notes_used)
    left = quorum.remove_note("concert_singer", note.id)
    assert all(n.id != note.id for n in left.notes)
    with pytest.raises(QuorumError) as empty:
        quorum.add_note("concert_singer", "   ")
    assert empty.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_database_is_not_found(quorum: Client) -> None:
    with pytest.raises(QuorumError) as missing:
        quorum.ask("no_such_db", "How many?")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND


def test_a_busy_server_is_retried_after_its_pushback(target: str, token: str, quorum: Client) -> None:
    # Hold the server's only text-to-SQL slot: a streamed run holds it from its first event
    # to its answer, however fast its events are read.
    with Client(target, token=token, timeout=120) as holder:
        events = holder.ask_stream("concert_singer", "What are the names and ages of all singers?")
        assert next(events).WhichOneof("event") == "pre_sql"
        rest: list = []
        drain = threading.Thread(target=lambda: rest.extend(events))
        drain.start()
        with Client(target, token=token, retries=0) as impatient:
            with pytest.raises(QuorumError) as busy:
                impatient.ask("concert_singer", "How many concerts are there?")
        assert busy.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert busy.value.pushback_s == 1.0
        with Client(target, token=token, retries=60) as patient:
            answer = patient.ask("concert_singer", "How many concerts are there?")
        assert answer.sql
        assert patient.retries_made >= 1
        drain.join(timeout=120)
    assert rest and rest[-1].WhichOneof("event") == "answer"


def test_rows_come_back_as_python_values(quorum: Client) -> None:
    answer = quorum.ask("concert_singer", "How many singers do we have?")
    assert quorum.rows(answer).rows == [(6,)]
    grouped = quorum.query(
        "concert_singer",
        "SELECT country, count(*) AS n, avg(age) AS age, NULL AS missing FROM singer "
        "GROUP BY country ORDER BY country",
    )
    assert isinstance(grouped, Rows)
    assert [c.lower() for c in grouped.columns] == ["country", "n", "age", "missing"]
    assert grouped.total_rows == 3 and not grouped.truncated
    country, n, age, missing = grouped.rows[0]
    assert (country, n, missing) == ("France", 4, None) and isinstance(age, float)
    assert grouped.dicts()[1][grouped.columns[1]] == 1
    frame = grouped.to_pandas()
    assert list(frame.columns) == grouped.columns and frame.shape == (3, 4)
    assert int(frame[grouped.columns[1]].sum()) == 6


def test_a_write_through_query_is_refused(quorum: Client) -> None:
    with pytest.raises(QuorumError) as refused:
        quorum.query("concert_singer", "DELETE FROM singer")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_the_readme_example_runs(target: str, token: str) -> None:
    """The README's example, as written but for the server's address and token."""
    example = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    example = example.replace('"127.0.0.1:50051", token=None', f"{target!r}, token={token!r}")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, str(README), "exec"), {})
    out = printed.getvalue()
    assert "SELECT count(*) FROM singer [(6,)]" in out, out
    assert "'France', " in out, out
