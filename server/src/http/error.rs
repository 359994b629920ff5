//! How a failure answers over HTTP: the gRPC status the services return, mapped onto the HTTP
//! status a web client expects (Google's published mapping of the two code tables), in the
//! error body OpenAI clients parse: `{"error": {"message", "type", "param", "code",
//! "grpc_code"}}`, where `type` and `code` are OpenAI's (`invalid_request_error`,
//! `model_not_found`, `context_length_exceeded`, `rate_limit_exceeded`, ...; `code` is null
//! where OpenAI has none) and `grpc_code` is the gRPC status the same call answers over gRPC.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tonic::Code;

use crate::status::{RETRY_PUSHBACK_HEADER, RETRY_PUSHBACK_MS};

/// A failed HTTP request.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: Code,
    pub message: String,
    /// The request field at fault, when one is.
    pub param: Option<String>,
    /// OpenAI's code for the error where the status alone does not say it.
    pub openai_code: Option<&'static str>,
}

impl ApiError {
    /// A request the HTTP layer itself refuses (before any service sees it).
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: Code::InvalidArgument,
            message: format!("invalid `{param}`: {}", message.into()),
            param: Some(param.to_owned()),
            openai_code: None,
        }
    }

    /// A request field this API does not know; refused rather than ignored.
    pub fn unknown_field(param: &str) -> Self {
        Self {
            openai_code: Some("unknown_parameter"),
            ..Self::invalid(param, "unrecognized request argument")
        }
    }

    /// With OpenAI's code for it.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.openai_code = Some(code);
        self
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: Code::NotFound,
            message: message.into(),
            param: None,
            openai_code: None,
        }
    }

    /// The OpenAI `type` of the error, from its status.
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 404 | 405 | 409 | 413 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            503 | 504 => "service_unavailable",
            _ => "server_error",
        }
    }

    /// OpenAI's `code`: the one set, else what the status and message say, else none.
    fn openai_code(&self) -> Option<&'static str> {
        if self.openai_code.is_some() {
            return self.openai_code;
        }
        match self.status.as_u16() {
            401 => Some("invalid_api_key"),
            429 => Some("rate_limit_exceeded"),
            400 if self.message.contains(crate::status::CONTEXT_EXCEEDED) => {
                Some("context_length_exceeded")
            }
            400 if self.param.is_some() => Some("invalid_value"),
            _ => None,
        }
    }

    /// The error as a JSON value, for the body and for a stream's error event.
    pub fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind(),
                "param": self.param,
                "code": self.openai_code(),
                "grpc_code": crate::metrics::code_label(self.code),
            }
        })
    }
}

/// The HTTP status of a gRPC code.
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition => {
            StatusCode::BAD_REQUEST
        }
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        // The client's own cancellation; nginx's 499 is the customary code.
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        // The services name the field in their message (`invalid `sampling.temperature`: ...`).
        let param = status
            .message()
            .strip_prefix("invalid `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(field, _)| field.to_owned());
        Self {
            status: http_status(status.code()),
            code: status.code(),
            message: status.message().to_owned(),
            param,
            openai_code: None,
        }
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        let status = rejection.status();
        let message = rejection.body_text();
        // serde names the field at fault as "missing field `model`" or "unknown field `x`".
        let named = |phrase: &str| {
            message
                .split_once(phrase)
                .and_then(|(_, rest)| rest.split_once('`'))
                .map(|(field, _)| field.to_owned())
        };
        let (param, openai_code) = match (named("missing field `"), named("unknown field `")) {
            (Some(field), _) => (Some(field), Some("missing_required_parameter")),
            (None, Some(field)) => (Some(field), Some("unknown_parameter")),
            (None, None) => (None, None),
        };
        Self {
            status: if status == StatusCode::UNPROCESSABLE_ENTITY {
                StatusCode::BAD_REQUEST
            } else {
                status
            },
            code: if status == StatusCode::PAYLOAD_TOO_LARGE {
                Code::ResourceExhausted
            } else {
                Code::InvalidArgument
            },
            openai_code,
            message,
            param,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        // A full queue says when to come back, as gRPC's pushback does.
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            let secs = RETRY_PUSHBACK_MS.div_ceil(1000).to_string();
            if let Ok(v) = HeaderValue::from_str(&secs) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
            if let Ok(v) = HeaderValue::from_str(&RETRY_PUSHBACK_MS.to_string()) {
                response.headers_mut().insert(RETRY_PUSHBACK_HEADER, v);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_codes_map_onto_the_http_statuses_clients_expect() {
        let cases = [
            (Code::InvalidArgument, 400),
            (Code::FailedPrecondition, 400),
            (Code::Unauthenticated, 401),
            (Code::PermissionDenied, 403),
            (Code::NotFound, 404),
            (Code::AlreadyExists, 409),
            (Code::ResourceExhausted, 429),
            (Code::Unavailable, 503),
            (Code::DeadlineExceeded, 504),
            (Code::Internal, 500),
        ];
        for (code, http) in cases {
            assert_eq!(http_status(code).as_u16(), http, "{code:?}");
        }
    }

    #[test]
    fn the_field_named_by_a_service_becomes_the_param() {
        let e = ApiError::from(tonic::Status::invalid_argument(
            "invalid `sampling.temperature`: must be >= 0",
        ));
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.param.as_deref(), Some("sampling.temperature"));
        let body = e.body();
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["code"], "invalid_value");
        assert_eq!(body["error"]["grpc_code"], "INVALID_ARGUMENT");
    }

    #[test]
    fn openai_codes_stand_beside_the_grpc_ones() {
        let context = ApiError::from(tonic::Status::invalid_argument(format!(
            "invalid `max_tokens`: 900 prompt tokens plus 8000 new tokens {} of 8192 tokens",
            crate::status::CONTEXT_EXCEEDED
        )));
        assert_eq!(context.body()["error"]["code"], "context_length_exceeded");
        assert_eq!(context.param.as_deref(), Some("max_tokens"));
        let unknown = ApiError::unknown_field("logit_bias").body();
        assert_eq!(unknown["error"]["code"], "unknown_parameter");
        assert_eq!(unknown["error"]["param"], "logit_bias");
        let key = ApiError::from(tonic::Status::unauthenticated("no token")).body();
        assert_eq!(key["error"]["code"], "invalid_api_key");
        assert_eq!(key["error"]["grpc_code"], "UNAUTHENTICATED");
        let missing = ApiError::not_found("no such route").body();
        assert_eq!(missing["error"]["code"], serde_json::Value::Null);
    }

    #[test]
    fn a_full_queue_says_when_to_retry() {
        let e = ApiError::from(tonic::Status::resource_exhausted("server busy"));
        let response = e.into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }
}
