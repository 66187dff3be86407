//! The custom-agent example (`examples/shout.rs`): its server, started as the example starts it,
//! answers over gRPC and publishes its card.
mod common;

#[path = "../examples/shout.rs"]
#[allow(dead_code)]
mod shout;

use a2a_server::proto::TaskState;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::stream_response::Payload;
use common::*;

#[tokio::test]
async fn the_example_agent_streams_its_answer_and_publishes_its_card() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(shout::serve(listener, async {
        let _ = stopped.await;
    }));

    let mut client = A2aServiceClient::connect(format!("http://{addr}")).await.expect("connect");
    let stream = client.send_streaming_message(send("hello a2a world")).await.expect("stream").into_inner();
    let items = collect(stream).await.expect("items");
    let chunks: Vec<(Vec<String>, bool, bool)> = items
        .iter()
        .filter_map(|item| match &item.payload {
            Some(Payload::ArtifactUpdate(update)) => {
                Some((chunk_texts(item), update.append, update.last_chunk))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        chunks,
        [
            (vec!["HELLO".to_owned()], false, false),
            (vec!["A2A".to_owned()], true, false),
            (vec!["WORLD".to_owned()], true, true)
        ]
    );
    assert_eq!(items.last().and_then(item_state), Some(TaskState::Completed));

    let card: serde_json::Value = reqwest::get(format!("http://{addr}/.well-known/agent-card.json"))
        .await
        .expect("card")
        .json()
        .await
        .expect("JSON");
    assert_eq!(card["name"], "shout");
    assert_eq!(card["skills"][0]["id"], "shout");

    drop(client);
    stop.send(()).expect("the server is running");
    server.await.expect("join").expect("the server stops cleanly");
}
