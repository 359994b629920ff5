from quorum_client._proto.quorum.v1 import common_pb2 as _common_pb2
from quorum_client._proto.quorum.v1 import databases_pb2 as _databases_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LinkMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LINK_METHOD_UNSPECIFIED: _ClassVar[LinkMethod]
    LINK_METHOD_ZERO_SHOT: _ClassVar[LinkMethod]
    LINK_METHOD_FEW_SHOT: _ClassVar[LinkMethod]
    LINK_METHOD_PRE_SQL: _ClassVar[LinkMethod]
    LINK_METHOD_FEW_SHOT_PRE_SQL: _ClassVar[LinkMethod]

class DebugStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEBUG_STRATEGY_UNSPECIFIED: _ClassVar[DebugStrategy]
    DEBUG_STRATEGY_REGENERATE: _ClassVar[DebugStrategy]
    DEBUG_STRATEGY_WRONG_SQL: _ClassVar[DebugStrategy]
    DEBUG_STRATEGY_SYSTEM_ERROR: _ClassVar[DebugStrategy]
    DEBUG_STRATEGY_ALL_ERRORS: _ClassVar[DebugStrategy]
    DEBUG_STRATEGY_WITH_COMMENTS: _ClassVar[DebugStrategy]

class OptimizeMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPTIMIZE_METHOD_UNSPECIFIED: _ClassVar[OptimizeMethod]
    OPTIMIZE_METHOD_WITH_SQL: _ClassVar[OptimizeMethod]
    OPTIMIZE_METHOD_WITH_CONTEXT: _ClassVar[OptimizeMethod]
    OPTIMIZE_METHOD_FEW_SHOT: _ClassVar[OptimizeMethod]
    OPTIMIZE_METHOD_FEW_SHOT_COMMENTS: _ClassVar[OptimizeMethod]
    OPTIMIZE_METHOD_DIRECT: _ClassVar[OptimizeMethod]

class VotingMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VOTING_MODE_UNSPECIFIED: _ClassVar[VotingMode]
    VOTING_MODE_NONE: _ClassVar[VotingMode]
    VOTING_MODE_MAJORITY: _ClassVar[VotingMode]

class CandidateRound(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CANDIDATE_ROUND_UNSPECIFIED: _ClassVar[CandidateRound]
    CANDIDATE_ROUND_PRE_SQL: _ClassVar[CandidateRound]
    CANDIDATE_ROUND_FIN_SQL: _ClassVar[CandidateRound]
    CANDIDATE_ROUND_REVISION: _ClassVar[CandidateRound]
LINK_METHOD_UNSPECIFIED: LinkMethod
LINK_METHOD_ZERO_SHOT: LinkMethod
LINK_METHOD_FEW_SHOT: LinkMethod
LINK_METHOD_PRE_SQL: LinkMethod
LINK_METHOD_FEW_SHOT_PRE_SQL: LinkMethod
DEBUG_STRATEGY_UNSPECIFIED: DebugStrategy
DEBUG_STRATEGY_REGENERATE: DebugStrategy
DEBUG_STRATEGY_WRONG_SQL: DebugStrategy
DEBUG_STRATEGY_SYSTEM_ERROR: DebugStrategy
DEBUG_STRATEGY_ALL_ERRORS: DebugStrategy
DEBUG_STRATEGY_WITH_COMMENTS: DebugStrategy
OPTIMIZE_METHOD_UNSPECIFIED: OptimizeMethod
OPTIMIZE_METHOD_WITH_SQL: OptimizeMethod
OPTIMIZE_METHOD_WITH_CONTEXT: OptimizeMethod
OPTIMIZE_METHOD_FEW_SHOT: OptimizeMethod
OPTIMIZE_METHOD_FEW_SHOT_COMMENTS: OptimizeMethod
OPTIMIZE_METHOD_DIRECT: OptimizeMethod
VOTING_MODE_UNSPECIFIED: VotingMode
VOTING_MODE_NONE: VotingMode
VOTING_MODE_MAJORITY: VotingMode
CANDIDATE_ROUND_UNSPECIFIED: CandidateRound
CANDIDATE_ROUND_PRE_SQL: CandidateRound
CANDIDATE_ROUND_FIN_SQL: CandidateRound
CANDIDATE_ROUND_REVISION: CandidateRound

class LinkSchemaRequest(_message.Message):
    __slots__ = ("question", "db_id", "evidence", "method", "foreign_keys", "generator")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FOREIGN_KEYS_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    question: str
    db_id: str
    evidence: str
    method: LinkMethod
    foreign_keys: bool
    generator: str
    def __init__(self, question: _Optional[str] = ..., db_id: _Optional[str] = ..., evidence: _Optional[str] = ..., method: _Optional[_Union[LinkMethod, str]] = ..., foreign_keys: _Optional[bool] = ..., generator: _Optional[str] = ...) -> None: ...

class LinkedTable(_message.Message):
    __slots__ = ("name", "columns")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    name: str
    columns: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., columns: _Optional[_Iterable[str]] = ...) -> None: ...

class LinkSchemaResponse(_message.Message):
    __slots__ = ("tables", "method", "foreign_keys", "listed", "unknown_names", "pre_sql", "pre_sql_parsed", "tokens_generated", "generator", "elapsed_ms")
    TABLES_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FOREIGN_KEYS_FIELD_NUMBER: _ClassVar[int]
    LISTED_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_NAMES_FIELD_NUMBER: _ClassVar[int]
    PRE_SQL_FIELD_NUMBER: _ClassVar[int]
    PRE_SQL_PARSED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_GENERATED_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedCompositeFieldContainer[LinkedTable]
    method: LinkMethod
    foreign_keys: bool
    listed: str
    unknown_names: _containers.RepeatedScalarFieldContainer[str]
    pre_sql: str
    pre_sql_parsed: bool
    tokens_generated: int
    generator: str
    elapsed_ms: float
    def __init__(self, tables: _Optional[_Iterable[_Union[LinkedTable, _Mapping]]] = ..., method: _Optional[_Union[LinkMethod, str]] = ..., foreign_keys: _Optional[bool] = ..., listed: _Optional[str] = ..., unknown_names: _Optional[_Iterable[str]] = ..., pre_sql: _Optional[str] = ..., pre_sql_parsed: _Optional[bool] = ..., tokens_generated: _Optional[int] = ..., generator: _Optional[str] = ..., elapsed_ms: _Optional[float] = ...) -> None: ...

class DebugRequest(_message.Message):
    __slots__ = ("question", "db_id", "evidence", "sql", "reference_sql", "error", "strategy", "rounds", "generator")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_SQL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    question: str
    db_id: str
    evidence: str
    sql: str
    reference_sql: str
    error: str
    strategy: DebugStrategy
    rounds: int
    generator: str
    def __init__(self, question: _Optional[str] = ..., db_id: _Optional[str] = ..., evidence: _Optional[str] = ..., sql: _Optional[str] = ..., reference_sql: _Optional[str] = ..., error: _Optional[str] = ..., strategy: _Optional[_Union[DebugStrategy, str]] = ..., rounds: _Optional[int] = ..., generator: _Optional[str] = ...) -> None: ...

class Diagnosis(_message.Message):
    __slots__ = ("kind", "message")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    message: str
    def __init__(self, kind: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class DebugRound(_message.Message):
    __slots__ = ("round", "sql", "diagnosis", "tokens_generated")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSIS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_GENERATED_FIELD_NUMBER: _ClassVar[int]
    round: int
    sql: str
    diagnosis: Diagnosis
    tokens_generated: int
    def __init__(self, round: _Optional[int] = ..., sql: _Optional[str] = ..., diagnosis: _Optional[_Union[Diagnosis, _Mapping]] = ..., tokens_generated: _Optional[int] = ...) -> None: ...

class DebugResponse(_message.Message):
    __slots__ = ("sql", "fixed", "initial", "rounds", "strategy", "generator", "elapsed_ms")
    SQL_FIELD_NUMBER: _ClassVar[int]
    FIXED_FIELD_NUMBER: _ClassVar[int]
    INITIAL_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    sql: str
    fixed: bool
    initial: Diagnosis
    rounds: _containers.RepeatedCompositeFieldContainer[DebugRound]
    strategy: DebugStrategy
    generator: str
    elapsed_ms: float
    def __init__(self, sql: _Optional[str] = ..., fixed: _Optional[bool] = ..., initial: _Optional[_Union[Diagnosis, _Mapping]] = ..., rounds: _Optional[_Iterable[_Union[DebugRound, _Mapping]]] = ..., strategy: _Optional[_Union[DebugStrategy, str]] = ..., generator: _Optional[str] = ..., elapsed_ms: _Optional[float] = ...) -> None: ...

class DebugEvent(_message.Message):
    __slots__ = ("round", "answer")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    round: DebugRound
    answer: DebugResponse
    def __init__(self, round: _Optional[_Union[DebugRound, _Mapping]] = ..., answer: _Optional[_Union[DebugResponse, _Mapping]] = ...) -> None: ...

class OptimizeRequest(_message.Message):
    __slots__ = ("sql", "db_id", "question", "method", "rewrites", "timing_pairs", "min_speedup", "generator")
    SQL_FIELD_NUMBER: _ClassVar[int]
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REWRITES_FIELD_NUMBER: _ClassVar[int]
    TIMING_PAIRS_FIELD_NUMBER: _ClassVar[int]
    MIN_SPEEDUP_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    sql: str
    db_id: str
    question: str
    method: OptimizeMethod
    rewrites: int
    timing_pairs: int
    min_speedup: float
    generator: str
    def __init__(self, sql: _Optional[str] = ..., db_id: _Optional[str] = ..., question: _Optional[str] = ..., method: _Optional[_Union[OptimizeMethod, str]] = ..., rewrites: _Optional[int] = ..., timing_pairs: _Optional[int] = ..., min_speedup: _Optional[float] = ..., generator: _Optional[str] = ...) -> None: ...

class Rewrite(_message.Message):
    __slots__ = ("sql", "verdict", "message", "speedup", "original_ms", "rewrite_ms", "timing_pairs", "tokens_generated", "faster_pairs")
    SQL_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_MS_FIELD_NUMBER: _ClassVar[int]
    REWRITE_MS_FIELD_NUMBER: _ClassVar[int]
    TIMING_PAIRS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_GENERATED_FIELD_NUMBER: _ClassVar[int]
    FASTER_PAIRS_FIELD_NUMBER: _ClassVar[int]
    sql: str
    verdict: str
    message: str
    speedup: float
    original_ms: float
    rewrite_ms: float
    timing_pairs: int
    tokens_generated: int
    faster_pairs: int
    def __init__(self, sql: _Optional[str] = ..., verdict: _Optional[str] = ..., message: _Optional[str] = ..., speedup: _Optional[float] = ..., original_ms: _Optional[float] = ..., rewrite_ms: _Optional[float] = ..., timing_pairs: _Optional[int] = ..., tokens_generated: _Optional[int] = ..., faster_pairs: _Optional[int] = ...) -> None: ...

class OptimizeResponse(_message.Message):
    __slots__ = ("sql", "chosen", "rewrites", "original_ms", "method", "generator", "elapsed_ms")
    SQL_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_FIELD_NUMBER: _ClassVar[int]
    REWRITES_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_MS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    sql: str
    chosen: int
    rewrites: _containers.RepeatedCompositeFieldContainer[Rewrite]
    original_ms: float
    method: OptimizeMethod
    generator: str
    elapsed_ms: float
    def __init__(self, sql: _Optional[str] = ..., chosen: _Optional[int] = ..., rewrites: _Optional[_Iterable[_Union[Rewrite, _Mapping]]] = ..., original_ms: _Optional[float] = ..., method: _Optional[_Union[OptimizeMethod, str]] = ..., generator: _Optional[str] = ..., elapsed_ms: _Optional[float] = ...) -> None: ...

class OptimizeEvent(_message.Message):
    __slots__ = ("rewrite", "answer")
    REWRITE_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    rewrite: Rewrite
    answer: OptimizeResponse
    def __init__(self, rewrite: _Optional[_Union[Rewrite, _Mapping]] = ..., answer: _Optional[_Union[OptimizeResponse, _Mapping]] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("sql", "db_id", "question", "generator", "threshold")
    SQL_FIELD_NUMBER: _ClassVar[int]
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    sql: str
    db_id: str
    question: str
    generator: str
    threshold: float
    def __init__(self, sql: _Optional[str] = ..., db_id: _Optional[str] = ..., question: _Optional[str] = ..., generator: _Optional[str] = ..., threshold: _Optional[float] = ...) -> None: ...

class Consistency(_message.Message):
    __slots__ = ("p_same", "p_same_by_order", "consistent", "threshold")
    P_SAME_FIELD_NUMBER: _ClassVar[int]
    P_SAME_BY_ORDER_FIELD_NUMBER: _ClassVar[int]
    CONSISTENT_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    p_same: float
    p_same_by_order: _containers.RepeatedScalarFieldContainer[float]
    consistent: bool
    threshold: float
    def __init__(self, p_same: _Optional[float] = ..., p_same_by_order: _Optional[_Iterable[float]] = ..., consistent: _Optional[bool] = ..., threshold: _Optional[float] = ...) -> None: ...

class ExplainResponse(_message.Message):
    __slots__ = ("explanation", "consistency", "tokens_generated", "generator", "elapsed_ms")
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    TOKENS_GENERATED_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    explanation: str
    consistency: Consistency
    tokens_generated: int
    generator: str
    elapsed_ms: float
    def __init__(self, explanation: _Optional[str] = ..., consistency: _Optional[_Union[Consistency, _Mapping]] = ..., tokens_generated: _Optional[int] = ..., generator: _Optional[str] = ..., elapsed_ms: _Optional[float] = ...) -> None: ...

class PipelineOptions(_message.Message):
    __slots__ = ("round2", "round1_shots", "round2_shots", "revision", "revision_rounds", "voting", "selector", "generators", "preview_rows", "round1_format", "rep_optimization_rule", "rep_cell_values", "rep_foreign_keys", "revise_empty", "revision_samples", "answer_prefix", "constrained", "revision_temperature", "consistency_check", "consistency_threshold", "revise_settled", "selector_vote_weight", "value_retrieval", "schema_filter_above", "link_columns", "defect_check", "both_as_intersection", "mend_self_joins", "respell_values", "link_named_tables", "drop_unused_joins", "term_hints", "group_by_key", "evidence_filter", "drop_unlabeled_groups", "case_blind_like", "calendar_days", "revise_beside_results", "mend_wrong_keys")
    ROUND2_FIELD_NUMBER: _ClassVar[int]
    ROUND1_SHOTS_FIELD_NUMBER: _ClassVar[int]
    ROUND2_SHOTS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    REVISION_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    VOTING_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    GENERATORS_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_ROWS_FIELD_NUMBER: _ClassVar[int]
    ROUND1_FORMAT_FIELD_NUMBER: _ClassVar[int]
    REP_OPTIMIZATION_RULE_FIELD_NUMBER: _ClassVar[int]
    REP_CELL_VALUES_FIELD_NUMBER: _ClassVar[int]
    REP_FOREIGN_KEYS_FIELD_NUMBER: _ClassVar[int]
    REVISE_EMPTY_FIELD_NUMBER: _ClassVar[int]
    REVISION_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    ANSWER_PREFIX_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINED_FIELD_NUMBER: _ClassVar[int]
    REVISION_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_CHECK_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    REVISE_SETTLED_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_VOTE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    VALUE_RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FILTER_ABOVE_FIELD_NUMBER: _ClassVar[int]
    LINK_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    DEFECT_CHECK_FIELD_NUMBER: _ClassVar[int]
    BOTH_AS_INTERSECTION_FIELD_NUMBER: _ClassVar[int]
    MEND_SELF_JOINS_FIELD_NUMBER: _ClassVar[int]
    RESPELL_VALUES_FIELD_NUMBER: _ClassVar[int]
    LINK_NAMED_TABLES_FIELD_NUMBER: _ClassVar[int]
    DROP_UNUSED_JOINS_FIELD_NUMBER: _ClassVar[int]
    TERM_HINTS_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_KEY_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FILTER_FIELD_NUMBER: _ClassVar[int]
    DROP_UNLABELED_GROUPS_FIELD_NUMBER: _ClassVar[int]
    CASE_BLIND_LIKE_FIELD_NUMBER: _ClassVar[int]
    CALENDAR_DAYS_FIELD_NUMBER: _ClassVar[int]
    REVISE_BESIDE_RESULTS_FIELD_NUMBER: _ClassVar[int]
    MEND_WRONG_KEYS_FIELD_NUMBER: _ClassVar[int]
    round2: bool
    round1_shots: int
    round2_shots: int
    revision: bool
    revision_rounds: int
    voting: VotingMode
    selector: bool
    generators: _containers.RepeatedScalarFieldContainer[str]
    preview_rows: int
    round1_format: str
    rep_optimization_rule: bool
    rep_cell_values: bool
    rep_foreign_keys: bool
    revise_empty: bool
    revision_samples: int
    answer_prefix: bool
    constrained: bool
    revision_temperature: float
    consistency_check: bool
    consistency_threshold: float
    revise_settled: bool
    selector_vote_weight: float
    value_retrieval: bool
    schema_filter_above: int
    link_columns: bool
    defect_check: bool
    both_as_intersection: bool
    mend_self_joins: bool
    respell_values: bool
    link_named_tables: bool
    drop_unused_joins: bool
    term_hints: bool
    group_by_key: bool
    evidence_filter: bool
    drop_unlabeled_groups: bool
    case_blind_like: bool
    calendar_days: bool
    revise_beside_results: bool
    mend_wrong_keys: bool
    def __init__(self, round2: _Optional[bool] = ..., round1_shots: _Optional[int] = ..., round2_shots: _Optional[int] = ..., revision: _Optional[bool] = ..., revision_rounds: _Optional[int] = ..., voting: _Optional[_Union[VotingMode, str]] = ..., selector: _Optional[bool] = ..., generators: _Optional[_Iterable[str]] = ..., preview_rows: _Optional[int] = ..., round1_format: _Optional[str] = ..., rep_optimization_rule: _Optional[bool] = ..., rep_cell_values: _Optional[bool] = ..., rep_foreign_keys: _Optional[bool] = ..., revise_empty: _Optional[bool] = ..., revision_samples: _Optional[int] = ..., answer_prefix: _Optional[bool] = ..., constrained: _Optional[bool] = ..., revision_temperature: _Optional[float] = ..., consistency_check: _Optional[bool] = ..., consistency_threshold: _Optional[float] = ..., revise_settled: _Optional[bool] = ..., selector_vote_weight: _Optional[float] = ..., value_retrieval: _Optional[bool] = ..., schema_filter_above: _Optional[int] = ..., link_columns: _Optional[bool] = ..., defect_check: _Optional[bool] = ..., both_as_intersection: _Optional[bool] = ..., mend_self_joins: _Optional[bool] = ..., respell_values: _Optional[bool] = ..., link_named_tables: _Optional[bool] = ..., drop_unused_joins: _Optional[bool] = ..., term_hints: _Optional[bool] = ..., group_by_key: _Optional[bool] = ..., evidence_filter: _Optional[bool] = ..., drop_unlabeled_groups: _Optional[bool] = ..., case_blind_like: _Optional[bool] = ..., calendar_days: _Optional[bool] = ..., revise_beside_results: _Optional[bool] = ..., mend_wrong_keys: _Optional[bool] = ...) -> None: ...

class Text2SqlRequest(_message.Message):
    __slots__ = ("question", "db_id", "evidence", "options")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    question: str
    db_id: str
    evidence: str
    options: PipelineOptions
    def __init__(self, question: _Optional[str] = ..., db_id: _Optional[str] = ..., evidence: _Optional[str] = ..., options: _Optional[_Union[PipelineOptions, _Mapping]] = ...) -> None: ...

class ExecutionOk(_message.Message):
    __slots__ = ("result_signature", "rows", "truncated")
    RESULT_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    result_signature: str
    rows: int
    truncated: bool
    def __init__(self, result_signature: _Optional[str] = ..., rows: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class ExecutionError(_message.Message):
    __slots__ = ("kind", "message")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    message: str
    def __init__(self, kind: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Candidate(_message.Message):
    __slots__ = ("id", "model", "round", "revision_attempt", "sql", "ok", "error", "revised_from", "tokens_generated", "repaired_from", "constrained", "prompt_tokens", "cached_tokens", "rewritten_by")
    ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    REVISION_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REVISED_FROM_FIELD_NUMBER: _ClassVar[int]
    TOKENS_GENERATED_FIELD_NUMBER: _ClassVar[int]
    REPAIRED_FROM_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINED_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REWRITTEN_BY_FIELD_NUMBER: _ClassVar[int]
    id: int
    model: str
    round: CandidateRound
    revision_attempt: int
    sql: str
    ok: ExecutionOk
    error: ExecutionError
    revised_from: int
    tokens_generated: int
    repaired_from: str
    constrained: bool
    prompt_tokens: int
    cached_tokens: int
    rewritten_by: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[int] = ..., model: _Optional[str] = ..., round: _Optional[_Union[CandidateRound, str]] = ..., revision_attempt: _Optional[int] = ..., sql: _Optional[str] = ..., ok: _Optional[_Union[ExecutionOk, _Mapping]] = ..., error: _Optional[_Union[ExecutionError, _Mapping]] = ..., revised_from: _Optional[int] = ..., tokens_generated: _Optional[int] = ..., repaired_from: _Optional[str] = ..., constrained: _Optional[bool] = ..., prompt_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., rewritten_by: _Optional[_Iterable[str]] = ...) -> None: ...

class LinkedTables(_message.Message):
    __slots__ = ("tables", "parsed", "fell_back_to_all")
    TABLES_FIELD_NUMBER: _ClassVar[int]
    PARSED_FIELD_NUMBER: _ClassVar[int]
    FELL_BACK_TO_ALL_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedScalarFieldContainer[str]
    parsed: bool
    fell_back_to_all: bool
    def __init__(self, tables: _Optional[_Iterable[str]] = ..., parsed: _Optional[bool] = ..., fell_back_to_all: _Optional[bool] = ...) -> None: ...

class Cluster(_message.Message):
    __slots__ = ("candidate_ids",)
    CANDIDATE_IDS_FIELD_NUMBER: _ClassVar[int]
    candidate_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, candidate_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class SelectorVerdict(_message.Message):
    __slots__ = ("labels", "shown", "logprobs", "chosen", "error")
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SHOWN_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.RepeatedScalarFieldContainer[str]
    shown: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    chosen: int
    error: str
    def __init__(self, labels: _Optional[_Iterable[str]] = ..., shown: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[float]] = ..., chosen: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class Vote(_message.Message):
    __slots__ = ("mode", "voters", "clusters", "winner", "split", "all_failed", "selector")
    MODE_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    ALL_FAILED_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    mode: VotingMode
    voters: _containers.RepeatedScalarFieldContainer[int]
    clusters: _containers.RepeatedCompositeFieldContainer[Cluster]
    winner: int
    split: bool
    all_failed: bool
    selector: SelectorVerdict
    def __init__(self, mode: _Optional[_Union[VotingMode, str]] = ..., voters: _Optional[_Iterable[int]] = ..., clusters: _Optional[_Iterable[_Union[Cluster, _Mapping]]] = ..., winner: _Optional[int] = ..., split: _Optional[bool] = ..., all_failed: _Optional[bool] = ..., selector: _Optional[_Union[SelectorVerdict, _Mapping]] = ...) -> None: ...

class StageTimings(_message.Message):
    __slots__ = ("retrieval_ms", "round1_ms", "linking_ms", "round2_ms", "revision_ms", "execution_ms", "vote_ms", "selection_ms", "total_ms")
    RETRIEVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ROUND1_MS_FIELD_NUMBER: _ClassVar[int]
    LINKING_MS_FIELD_NUMBER: _ClassVar[int]
    ROUND2_MS_FIELD_NUMBER: _ClassVar[int]
    REVISION_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_MS_FIELD_NUMBER: _ClassVar[int]
    VOTE_MS_FIELD_NUMBER: _ClassVar[int]
    SELECTION_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MS_FIELD_NUMBER: _ClassVar[int]
    retrieval_ms: float
    round1_ms: float
    linking_ms: float
    round2_ms: float
    revision_ms: float
    execution_ms: float
    vote_ms: float
    selection_ms: float
    total_ms: float
    def __init__(self, retrieval_ms: _Optional[float] = ..., round1_ms: _Optional[float] = ..., linking_ms: _Optional[float] = ..., round2_ms: _Optional[float] = ..., revision_ms: _Optional[float] = ..., execution_ms: _Optional[float] = ..., vote_ms: _Optional[float] = ..., selection_ms: _Optional[float] = ..., total_ms: _Optional[float] = ...) -> None: ...

class Text2SqlResponse(_message.Message):
    __slots__ = ("sql", "chosen_candidate", "preview", "candidates", "vote", "linked_tables", "demos", "timings", "tokens_generated", "settings", "consistency", "unrevised_candidates", "matched_values", "schema_filter", "term_hints", "notes_used", "evidence_set_aside")
    SQL_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    VOTE_FIELD_NUMBER: _ClassVar[int]
    LINKED_TABLES_FIELD_NUMBER: _ClassVar[int]
    DEMOS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_GENERATED_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    UNREVISED_CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    MATCHED_VALUES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FILTER_FIELD_NUMBER: _ClassVar[int]
    TERM_HINTS_FIELD_NUMBER: _ClassVar[int]
    NOTES_USED_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_SET_ASIDE_FIELD_NUMBER: _ClassVar[int]
    sql: str
    chosen_candidate: int
    preview: _common_pb2.ResultPreview
    candidates: _containers.RepeatedCompositeFieldContainer[Candidate]
    vote: Vote
    linked_tables: LinkedTables
    demos: _containers.RepeatedScalarFieldContainer[str]
    timings: StageTimings
    tokens_generated: int
    settings: _containers.RepeatedCompositeFieldContainer[Setting]
    consistency: ConsistencyCheck
    unrevised_candidates: _containers.RepeatedScalarFieldContainer[int]
    matched_values: _containers.RepeatedCompositeFieldContainer[MatchedValue]
    schema_filter: SchemaFilter
    term_hints: _containers.RepeatedCompositeFieldContainer[TermHint]
    notes_used: _containers.RepeatedCompositeFieldContainer[_databases_pb2.Note]
    evidence_set_aside: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, sql: _Optional[str] = ..., chosen_candidate: _Optional[int] = ..., preview: _Optional[_Union[_common_pb2.ResultPreview, _Mapping]] = ..., candidates: _Optional[_Iterable[_Union[Candidate, _Mapping]]] = ..., vote: _Optional[_Union[Vote, _Mapping]] = ..., linked_tables: _Optional[_Union[LinkedTables, _Mapping]] = ..., demos: _Optional[_Iterable[str]] = ..., timings: _Optional[_Union[StageTimings, _Mapping]] = ..., tokens_generated: _Optional[int] = ..., settings: _Optional[_Iterable[_Union[Setting, _Mapping]]] = ..., consistency: _Optional[_Union[ConsistencyCheck, _Mapping]] = ..., unrevised_candidates: _Optional[_Iterable[int]] = ..., matched_values: _Optional[_Iterable[_Union[MatchedValue, _Mapping]]] = ..., schema_filter: _Optional[_Union[SchemaFilter, _Mapping]] = ..., term_hints: _Optional[_Iterable[_Union[TermHint, _Mapping]]] = ..., notes_used: _Optional[_Iterable[_Union[_databases_pb2.Note, _Mapping]]] = ..., evidence_set_aside: _Optional[_Iterable[str]] = ...) -> None: ...

class TermHint(_message.Message):
    __slots__ = ("word", "target", "similarity")
    WORD_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    word: str
    target: str
    similarity: float
    def __init__(self, word: _Optional[str] = ..., target: _Optional[str] = ..., similarity: _Optional[float] = ...) -> None: ...

class SchemaFilter(_message.Message):
    __slots__ = ("tables", "schema_tables")
    TABLES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_TABLES_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedScalarFieldContainer[str]
    schema_tables: int
    def __init__(self, tables: _Optional[_Iterable[str]] = ..., schema_tables: _Optional[int] = ...) -> None: ...

class MatchedValue(_message.Message):
    __slots__ = ("table", "column", "value", "score")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    table: str
    column: str
    value: str
    score: float
    def __init__(self, table: _Optional[str] = ..., column: _Optional[str] = ..., value: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class ConsistencyCheck(_message.Message):
    __slots__ = ("explanation", "verdict", "error", "elapsed_ms")
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    explanation: str
    verdict: Consistency
    error: str
    elapsed_ms: float
    def __init__(self, explanation: _Optional[str] = ..., verdict: _Optional[_Union[Consistency, _Mapping]] = ..., error: _Optional[str] = ..., elapsed_ms: _Optional[float] = ...) -> None: ...

class Setting(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Text2SqlEvent(_message.Message):
    __slots__ = ("pre_sql", "linked_tables", "candidate", "vote", "answer")
    PRE_SQL_FIELD_NUMBER: _ClassVar[int]
    LINKED_TABLES_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    VOTE_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    pre_sql: Candidate
    linked_tables: LinkedTables
    candidate: Candidate
    vote: Vote
    answer: Text2SqlResponse
    def __init__(self, pre_sql: _Optional[_Union[Candidate, _Mapping]] = ..., linked_tables: _Optional[_Union[LinkedTables, _Mapping]] = ..., candidate: _Optional[_Union[Candidate, _Mapping]] = ..., vote: _Optional[_Union[Vote, _Mapping]] = ..., answer: _Optional[_Union[Text2SqlResponse, _Mapping]] = ...) -> None: ...
