use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Response;
use hyper::header::{CONTENT_TYPE, HeaderValue};

use super::*;
use crate::server::send_budget::Unsent;

fn answers(connection: usize, server: usize) -> (Arc<Answers>, Arc<Unsent>) {
    let unsent = Arc::new(Unsent::new(server));
    let budget = SendBudget::new(connection, unsent.clone(), Some(Duration::from_secs(30)));
    (Arc::new(Answers { budget, http1: Arc::default() }), unsent)
}

fn json(body: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[tokio::test]
async fn a_large_answer_goes_in_chunks_counted_until_handed_on() {
    let (answers, unsent) = answers(1 << 20, 1 << 20);
    let size = 5 * CHUNK / 2;
    let response = answers.clone().send(json(vec![b'x'; size]), ()).await;
    assert_eq!(unsent.bytes(), size, "counted before its first byte is taken");
    assert_eq!(answers.http1.held(), size);
    let mut body = response.into_body();
    let mut chunks = Vec::new();
    while let Some(frame) = body.frame().await {
        chunks.push(frame.unwrap().into_data().unwrap().len());
        assert_eq!(unsent.bytes(), size - chunks.iter().sum::<usize>());
    }
    assert_eq!(chunks, [CHUNK, CHUNK, CHUNK / 2]);
    drop(body);
    assert_eq!(answers.http1.held(), 0);
}

#[tokio::test]
async fn a_small_answer_is_not_counted_and_a_dropped_one_gives_its_count_back() {
    let (answers, unsent) = answers(1 << 20, 1 << 20);
    let small = answers.clone().send(json(vec![b'x'; 100]), ()).await;
    assert_eq!(unsent.bytes(), 0);
    let large = answers.clone().send(json(vec![b'x'; 2 * CHUNK]), ()).await;
    assert_eq!(unsent.bytes(), 2 * CHUNK);
    drop((small, large));
    assert_eq!(unsent.bytes(), 0, "an answer never read frees its count with its body");
}

#[tokio::test]
async fn an_answer_over_the_budget_is_refused_in_its_bindings_form() {
    let (answers, unsent) = answers(4 * CHUNK, 1 << 30);
    let _held = answers.clone().send(json(vec![b'x'; 3 * CHUNK]), ()).await;

    let mut rpc = br#"{"jsonrpc":"2.0","id":"call-7","result":"#.to_vec();
    rpc.extend(vec![b'1'; 2 * CHUNK]);
    rpc.push(b'}');
    let refused = answers.clone().send(json(rpc), ()).await;
    assert_eq!(refused.status(), 200, "JSON-RPC errors ride a 200");
    let text = refused.into_body().collect().await.unwrap().to_bytes();
    let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(value["id"], "call-7");
    assert!(
        value["error"]["message"].as_str().unwrap().contains("max-unsent-bytes-per-connection"),
        "{value}"
    );

    let refused = answers.clone().send(json(vec![b'x'; 2 * CHUNK]), ()).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "30");

    let mut grpc = Response::new(Body::from(vec![0u8; 2 * CHUNK]));
    grpc.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc-web+proto"));
    let refused = answers.clone().send(grpc, ()).await;
    assert_eq!(refused.headers()["grpc-status"], "8", "trailers-only RESOURCE_EXHAUSTED");
    assert_eq!(refused.headers()[CONTENT_TYPE], "application/grpc-web+proto");
    assert_eq!(unsent.bytes(), 3 * CHUNK, "refusals count nothing");
}

#[tokio::test]
async fn a_grpc_frame_over_the_budget_ends_its_stream_with_a_status() {
    let (answers, _) = answers(2 * CHUNK, 1 << 30);
    let frames = futures::stream::iter([
        Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(vec![0u8; 2 * CHUNK]))),
        Ok(http_body::Frame::data(Bytes::from(vec![0u8; 3 * CHUNK]))),
    ]);
    let mut response = Response::new(Body::new(http_body_util::StreamBody::new(frames)));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    let response = answers.clone().send(response, ()).await;
    let mut body = response.into_body();
    // The first frame fits; the second is larger than the connection's whole budget.
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap().len(), CHUNK);
    assert_eq!(body.frame().await.unwrap().unwrap().into_data().unwrap().len(), CHUNK);
    let trailers = body.frame().await.unwrap().unwrap().into_trailers().unwrap();
    assert_eq!(trailers["grpc-status"], "8");
    assert!(body.frame().await.is_none());
}
