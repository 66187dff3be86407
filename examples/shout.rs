//! A custom agent served over every binding: `cargo run --example shout` (`A2A_LISTEN` to move it).
use std::sync::Arc;

use a2a_server::agent::{AgentExecutor, EventSink, RequestContext, text_artifact};
use a2a_server::error::{A2aError, BoxError};
use a2a_server::proto::AgentCard;
use a2a_server::protojson;
use a2a_server::server::Server;
use tokio::net::TcpListener;

/// Answers every message with its words in capitals, streamed one word per chunk.
pub struct Shout;

#[async_trait::async_trait]
impl AgentExecutor for Shout {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        events.working(None).await?;
        let words: Vec<String> = ctx.text().split_whitespace().map(str::to_uppercase).collect();
        for (i, word) in words.iter().enumerate() {
            events.artifact_chunk(text_artifact("shout", "shout", word), i > 0, i + 1 == words.len()).await?;
        }
        Ok(events.complete(None).await?)
    }
}

/// Serves [`Shout`] on `listener` until `stop` resolves.
pub async fn serve(
    listener: TcpListener,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BoxError> {
    let card: AgentCard = protojson::decode(&serde_json::json!({
        "name": "shout", "description": "Shouts your words back.", "version": "1.0.0",
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "shout", "name": "Shout", "description": "Capitalises words.", "tags": ["example"]}]
    }))?;
    Server::new(Arc::new(Shout), card).shutdown(stop).start(listener).await?.wait().await
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let listener =
        TcpListener::bind(std::env::var("A2A_LISTEN").as_deref().unwrap_or("127.0.0.1:50051")).await?;
    println!("shout agent listening on {}", listener.local_addr()?);
    serve(listener, async { tokio::signal::ctrl_c().await.unwrap_or_default() }).await
}
