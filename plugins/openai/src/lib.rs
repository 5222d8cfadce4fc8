//! Built-in `openai` adapter: any OpenAI-compatible Chat Completions upstream (OpenAI, groq,
//! mistral, vLLM, ...). The unified form is OpenAI's own, so this is a checked pass-through.

use adapter_kit::openai_compat::{self, Dialect, Session};
use adapter_kit::{Guest, Metadata};

struct OpenAi;

impl Dialect for OpenAi {
    const NAME: &'static str = "openai";
}

impl Guest for OpenAi {
    type Session = Session<OpenAi>;

    fn describe() -> Metadata {
        openai_compat::metadata::<OpenAi>()
    }
}

adapter_kit::openai_models!(OpenAi);
adapter_kit::no_native!(OpenAi);
adapter_kit::export!(OpenAi);
