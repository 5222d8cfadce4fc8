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
impl adapter_kit::NativeGuest for OpenAi {
    type NativeSession = openai_compat::NativeSession<OpenAi>;

    fn protocols() -> Vec<adapter_kit::NativeProtocol> {
        openai_compat::protocols()
    }
}
adapter_kit::export!(OpenAi);
