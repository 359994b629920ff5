"""`HttpClient` and `AsyncClient` against the live server `test_client.py` uses: the same calls
answer the same messages, errors carry the same gRPC codes, and a busy server is retried after
its pushback. QUORUM_HTTP names the server's HTTP port (`http://host:port`) beside
QUORUM_TARGET and QUORUM_TOKEN; without them the tests fail.
"""

import asyncio
import threading

import grpc
import pytest

from quorum_client import AsyncClient, Client, HttpClient, QuorumError, Rows, pb


@pytest.fixture(scope="module")
def http(base_url: str, token: str):
    with HttpClient(base_url, token=token, timeout=120) as client:
        client.wait_ready(timeout=300)
        yield client


def test_http_answers_the_messages_grpc_answers(http: HttpClient, target: str, token: str) -> None:
    answer = http.ask("concert_singer", "How many singers do we have?")
    assert answer.preview.rows[0].values[0].integer == 6
    assert http.rows(answer).rows == [(6,)]
    assert [c.id for c in answer.candidates] == list(range(len(answer.candidates)))
    with Client(target, token=token) as over_grpc:
        assert over_grpc.ask("concert_singer", "How many singers do we have?").sql == answer.sql
        assert http.describe("concert_singer") == over_grpc.describe("concert_singer")


def test_http_streams_the_stages(http: HttpClient) -> None:
    kinds = [e.WhichOneof("event") for e in http.ask_stream("concert_singer", "List the names of all singers.")]
    assert kinds[0] == "pre_sql" and kinds[-1] == "answer", kinds


def test_http_rows_sub_tasks_and_notes(http: HttpClient) -> None:
    grouped = http.query("concert_singer", "SELECT country, count(*) AS n, NULL AS x, 2.5 AS r FROM singer "
                                           "GROUP BY country ORDER BY country")
    assert isinstance(grouped, Rows) and grouped.rows[0] == ("France", 4, None, 2.5), grouped.rows
    assert "singer" in [t.name for t in http.link_schema("concert_singer", "How many singers are there?").tables]
    assert http.explain("concert_singer", "SELECT count(*) FROM singer").explanation.strip()
    note = http.add_note("concert_singer", "A concert's year is a four-digit string.")
    assert http.edit_note("concert_singer", note.id, "Years are four-digit strings.").text.startswith("Years")
    assert note.id in [n.id for n in http.notes("concert_singer").notes]
    assert note.id not in [n.id for n in http.remove_note("concert_singer", note.id).notes]


def test_http_errors_carry_the_grpc_codes(http: HttpClient, base_url: str) -> None:
    with pytest.raises(QuorumError) as missing:
        http.ask("no_such_db", "How many?")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(QuorumError) as refused:
        http.query("concert_singer", "DELETE FROM singer")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(QuorumError) as raw:
        http.tokenize("SELECT 1")
    assert raw.value.code == grpc.StatusCode.UNIMPLEMENTED
    with HttpClient(base_url, token="not-the-token") as stranger:
        with pytest.raises(QuorumError) as wrong:
            stranger.list_databases()
    assert wrong.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_http_retries_a_busy_server_after_its_pushback(base_url: str, target: str, token: str) -> None:
    with Client(target, token=token, timeout=120) as holder:
        events = holder.ask_stream("concert_singer", "What are the names and ages of all singers?")
        assert next(events).WhichOneof("event") == "pre_sql"
        rest: list = []
        drain = threading.Thread(target=lambda: rest.extend(events))
        drain.start()
        with HttpClient(base_url, token=token, retries=0) as impatient:
            with pytest.raises(QuorumError) as busy:
                impatient.ask("concert_singer", "How many concerts are there?")
        assert busy.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and busy.value.pushback_s == 1.0
        with HttpClient(base_url, token=token, retries=60) as patient:
            assert patient.ask("concert_singer", "How many concerts are there?").sql
        assert patient.retries_made >= 1
        drain.join(timeout=120)
    assert rest and rest[-1].WhichOneof("event") == "answer"


def test_the_async_client_makes_the_same_calls(target: str, token: str) -> None:
    async def run():
        async with AsyncClient(target, token=token, timeout=120) as quorum:
            await quorum.wait_ready(timeout=60)
            answer = await quorum.ask("concert_singer", "How many singers do we have?")
            kinds = [e.WhichOneof("event") async for e in quorum.ask_stream("concert_singer", "List the singers' names.")]
            rows = await quorum.query("concert_singer", "SELECT count(*) FROM singer")
            text = await quorum.generate("SELECT count(*) FROM", sampling=pb.inference_pb2.SamplingOptions(
                temperature=0.0, max_tokens=4))
            with pytest.raises(QuorumError) as missing:
                await quorum.describe("no_such_db")
            # Two questions at once over one channel.
            both = await asyncio.gather(
                quorum.query("concert_singer", "SELECT count(*) FROM concert"),
                quorum.query("concert_singer", "SELECT count(*) FROM stadium"),
            )
            return answer, kinds, rows, missing.value.code, both, text

    answer, kinds, rows, code, both, text = asyncio.run(run())
    assert text.strip()
    assert answer.preview.rows[0].values[0].integer == 6
    assert kinds[0] == "pre_sql" and kinds[-1] == "answer", kinds
    assert rows.rows == [(6,)]
    assert code == grpc.StatusCode.NOT_FOUND
    assert [b.rows[0][0] for b in both] == [6, 9]
