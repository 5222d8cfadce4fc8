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

impl adapter_kit::ModelsGuest for OpenAi {
    fn list_request(ctx: adapter_kit::SourceContext) -> Result<adapter_kit::HttpRequest, adapter_kit::AdapterError> {
        Ok(openai_compat::models_request(&ctx))
    }

    fn read_list(
        _ctx: adapter_kit::SourceContext,
        response: adapter_kit::HttpResponse,
    ) -> Result<Vec<String>, adapter_kit::AdapterError> {
        openai_compat::read_models(&response)
    }
}

adapter_kit::no_native!(OpenAi);
adapter_kit::export!(OpenAi);
