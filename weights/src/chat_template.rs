//! The model's own chat template (a Jinja template from GGUF metadata or tokenizer_config.json),
//! rendered with minijinja so prompts match what the model was trained on.

use minijinja::{Environment, context};
use serde::{Deserialize, Serialize};

use crate::error::{WeightsError, WeightsResult};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> Self {
        Self {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ChatTemplate {
    source: String,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

const TEMPLATE_NAME: &str = "chat";

impl ChatTemplate {
    /// Parses the template once so that a broken template fails at load time.
    pub fn new(
        source: String,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> WeightsResult<Self> {
        let template = Self {
            source,
            bos_token,
            eos_token,
        };
        template.environment()?;
        Ok(template)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    fn environment(&self) -> WeightsResult<Environment<'_>> {
        let mut env = Environment::new();
        // HF templates call Python string methods (`.strip()`, `.startswith()`).
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template(TEMPLATE_NAME, &self.source)
            .map_err(|e| WeightsError::ChatTemplate {
                detail: e.to_string(),
            })?;
        Ok(env)
    }

    /// Renders the conversation; with `add_generation_prompt` the text ends where the assistant's
    /// reply begins.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> WeightsResult<String> {
        let env = self.environment()?;
        let template = env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| WeightsError::ChatTemplate {
                detail: e.to_string(),
            })?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token.clone().unwrap_or_default(),
                eos_token => self.eos_token.clone().unwrap_or_default(),
            })
            .map_err(|e| WeightsError::ChatTemplate {
                detail: e.to_string(),
            })
    }
}

/// The text a model is given for one turn: the system and user messages through the model's chat
/// template (instruct models answer far better in their own format), or joined by a blank line
/// when it has none, then `answer_prefix`, the start of the reply written for the model. The
/// server prompts with this and the trainer builds its examples with it, so a fine-tuned model
/// sees at training time exactly what it is asked at serving time.
pub fn render_turn(
    template: Option<&ChatTemplate>,
    system: Option<&str>,
    user: &str,
    answer_prefix: Option<&str>,
) -> WeightsResult<String> {
    let mut messages = Vec::with_capacity(2);
    if let Some(system) = system {
        messages.push(ChatMessage::new("system", system));
    }
    messages.push(ChatMessage::new("user", user));
    let mut text = match template {
        Some(template) => template.render(&messages, true)?,
        None => messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n\n"),
    };
    if let Some(prefix) = answer_prefix {
        text.push_str(prefix);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_chatml() {
        let src = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
        let t = ChatTemplate::new(src.into(), None, None).unwrap();
        let out = t.render(&[ChatMessage::new("user", "hi")], true).unwrap();
        assert_eq!(
            out,
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn a_turn_is_template_then_answer_prefix() {
        let src = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";
        let t = ChatTemplate::new(src.into(), None, None).unwrap();
        let out = render_turn(Some(&t), Some("sys"), "q", Some("```sql\nSELECT ")).unwrap();
        assert_eq!(out, "[system]sys[user]q[assistant]```sql\nSELECT ");
        let plain = render_turn(None, Some("sys"), "q", None).unwrap();
        assert_eq!(plain, "sys\n\nq");
    }

    #[test]
    fn broken_template_is_an_error() {
        let err = ChatTemplate::new("{% for m in %}".into(), None, None).unwrap_err();
        assert_eq!(err.kind(), "chat_template");
    }
}
