"""The OpenAI-compatible face checked with the official `openai` Python client against a live
`quorum serve` (started by scripts/http_api_test.sh): the model list with the adapters as
models, a chat completion through an adapter, a streamed completion, a JSON-schema completion,
embeddings, the text-to-SQL pipeline as model `quorum-sql` (plain and streamed), and the errors
the client maps from HTTP statuses.

Usage: python openai_check.py BASE_URL TOKEN   (BASE_URL like http://127.0.0.1:9464/v1)
"""

import json
import math
import sys

import openai

base_url, token = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key=token, max_retries=0, timeout=120)

models = {m.id: m for m in client.models.list().data}
assert "qwen2.5-coder-0.5b" in models, models.keys()
assert "rep-s2" in models and models["rep-s2"].model_extra["parent"] == "qwen2.5-coder-0.5b", models
assert "all-minilm-l6-v2" in models
print(f"models: {sorted(models)}")

chat = client.chat.completions.create(
    model="rep-s2",
    messages=[{"role": "user", "content": "Write SQL that counts the rows of table singer."}],
    temperature=0,
    max_tokens=24,
)
content = chat.choices[0].message.content
assert content and content.strip(), chat
assert chat.choices[0].finish_reason in ("stop", "length"), chat
assert chat.usage.completion_tokens >= 1 and chat.usage.prompt_tokens > 5, chat.usage
print(f"chat (adapter rep-s2): {content!r}")

pieces, finishes, usage = [], [], None
for chunk in client.completions.create(
    model="qwen2.5-coder-0.5b",
    prompt="-- SQLite: count the rows of table singer\nSELECT",
    max_tokens=12,
    temperature=0,
    stream=True,
    stream_options={"include_usage": True},
):
    if chunk.usage:
        usage = chunk.usage
    for choice in chunk.choices:
        pieces.append(choice.text)
        if choice.finish_reason:
            finishes.append(choice.finish_reason)
streamed = "".join(pieces)
assert streamed.strip() and len(pieces) >= 2, pieces
assert finishes in (["stop"], ["length"]), finishes
assert usage and 1 <= usage.completion_tokens <= 12, usage
print(f"streamed completion in {len(pieces)} chunks: {streamed!r}")

schema = {
    "type": "object",
    "properties": {"table": {"type": "string"}, "rows": {"type": "integer"}},
    "required": ["table", "rows"],
    "additionalProperties": False,
}
structured = client.chat.completions.create(
    model="qwen2.5-coder-0.5b",
    messages=[{"role": "user", "content": "Table singer has 6 rows. Answer in JSON with the table name and its row count."}],
    temperature=0,
    max_tokens=64,
    response_format={"type": "json_schema", "json_schema": {"name": "count", "schema": schema, "strict": True}},
)
value = json.loads(structured.choices[0].message.content)
assert set(value) == {"table", "rows"} and isinstance(value["rows"], int), value
print(f"json_schema completion: {value}")

embedded = client.embeddings.create(
    model="all-minilm-l6-v2",
    input=["How many singers do we have?", "What is the total number of singers?", "List the stadiums by capacity."],
)
vectors = [d.embedding for d in embedded.data]
assert len(vectors) == 3 and all(len(v) == 384 for v in vectors), [len(v) for v in vectors]
assert all(abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-3 for v in vectors)
cos = lambda a, b: sum(x * y for x, y in zip(a, b))
assert cos(vectors[0], vectors[1]) > cos(vectors[0], vectors[2]), "paraphrases are not closer"
floats = client.embeddings.create(model="all-minilm-l6-v2", input="hi", encoding_format="float")
assert len(floats.data[0].embedding) == 384
print(f"embeddings: 3 x 384, paraphrase cosine {cos(vectors[0], vectors[1]):.3f} vs {cos(vectors[0], vectors[2]):.3f}")

assert "quorum-sql" in models and models["quorum-sql"].model_extra["roles"] == ["text2sql"], models
asked = client.chat.completions.create(
    model="quorum-sql",
    messages=[{"role": "system", "content": "database: concert_singer"},
              {"role": "user", "content": "How many singers do we have?"}],
)
reply = asked.choices[0].message.content
full = asked.model_extra["quorum"]
assert reply.startswith("```sql\n") and full["sql"] in reply, reply
assert "| 6 |" in reply, reply
assert full["preview"]["rows"] == [[6]] and full["preview"]["totalRows"] == 1, full["preview"]
print(f"pipeline model: {full['sql']!r} -> 6")
pieces, extension = [], None
for chunk in client.chat.completions.create(
    model="quorum-sql", extra_body={"database": "concert_singer"},
    messages=[{"role": "user", "content": "How many singers do we have?"}], stream=True,
):
    for choice in chunk.choices:
        pieces.append(choice.delta.content or "")
    extension = (chunk.model_extra or {}).get("quorum") or extension
assert "| 6 |" in "".join(pieces) and extension and extension["sql"], (pieces, extension)
print("pipeline model, streamed: the SQL, its table and the whole answer")

# LangChain's OpenAI chat model, as an agent framework would hold it: the pipeline behind it,
# and the fields LangChain sends accepted (none of them is dropped silently or refused).
from langchain_openai import ChatOpenAI

chain_model = ChatOpenAI(model="quorum-sql", base_url=base_url, api_key=token, max_retries=0,
                         extra_body={"database": "concert_singer"})
said = chain_model.invoke("How many singers do we have?")
assert "| 6 |" in said.content, said.content
streamed = "".join(part.content for part in chain_model.stream("How many singers do we have?"))
assert "| 6 |" in streamed, streamed
print("LangChain ChatOpenAI: the pipeline model answers 6, invoked and streamed")


def expect(error_type, status, call):
    try:
        call()
    except error_type as e:
        assert e.status_code == status, (e.status_code, e)
        return e
    raise AssertionError(f"expected {error_type.__name__}")

stranger = openai.OpenAI(base_url=base_url, api_key="not-the-token", max_retries=0)
expect(openai.AuthenticationError, 401, lambda: stranger.models.list())
expect(openai.NotFoundError, 404, lambda: client.chat.completions.create(
    model="no-such-model", messages=[{"role": "user", "content": "hi"}]))
one = client.models.retrieve("rep-s2")
assert one.id == "rep-s2" and one.model_extra["parent"] == "qwen2.5-coder-0.5b", one
assert client.models.retrieve("quorum-sql").model_extra["roles"] == ["text2sql"]
expect(openai.NotFoundError, 404, lambda: client.models.retrieve("no-such-model"))
print("models.retrieve: rep-s2 and quorum-sql found, an unknown id 404")
bad = expect(openai.BadRequestError, 400, lambda: client.chat.completions.create(
    model="qwen2.5-coder-0.5b", messages=[{"role": "user", "content": "hi"}], temperature=-1))
assert "sampling.temperature" in str(bad), bad
expect(openai.BadRequestError, 400, lambda: client.chat.completions.create(
    model="qwen2.5-coder-0.5b", messages=[{"role": "user", "content": "hi"}],
    response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}))
expect(openai.BadRequestError, 400, lambda: client.embeddings.create(model="all-minilm-l6-v2", input="word " * 600))
expect(openai.NotFoundError, 404, lambda: client.chat.completions.create(
    model="quorum-sql", extra_body={"database": "no_such_db"}, messages=[{"role": "user", "content": "hi"}]))
expect(openai.BadRequestError, 400, lambda: client.chat.completions.create(
    model="quorum-sql", messages=[{"role": "user", "content": "How many singers?"}]))
print("errors: 401 wrong token, 404 unknown model or database, 400 bad temperature / schema / "
      "overlong input / no database")
print("openai client check: OK")
