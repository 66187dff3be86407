//! The agent behind the in-process server: it answers at once, so that no input can park a
//! call for longer than the server takes to run it (the demo agent's `stream 9 60000` would
//! make a slow input of a correct server).
use a2a_server::agent::{AgentExecutor, EventSink, RequestContext, text_artifact};
use a2a_server::error::A2aError;
use async_trait::async_trait;

/// `input` asks for input (a live task to follow up, cancel or subscribe to); `fail` fails;
/// `message TEXT` replies without a task; anything else, or any follow-up, is echoed as an
/// artifact and completes.
pub struct QuickAgent;

#[async_trait]
impl AgentExecutor for QuickAgent {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        let text = ctx.text();
        if ctx.new_task {
            match text.trim() {
                "input" => return Ok(events.input_required(Some("more?")).await?),
                "fail" => return Ok(events.fail(Some("failed, as asked")).await?),
                other if other.starts_with("message ") => return Ok(events.reply(&other[8..]).await?),
                _ => {}
            }
        }
        events.artifact(text_artifact("echo", "echo", text)).await?;
        Ok(events.complete(None).await?)
    }
}
