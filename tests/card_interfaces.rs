//! `--card-interfaces`: which bindings the Agent Card lists and in what order, on the real
//! binary: the default (gRPC as `host:port` first), a list without gRPC (what Google ADK's
//! `RemoteA2aAgent` accepts), another order; the v0.3 forms follow; every binding stays served;
//! a bad list stops the server at start-up naming the flag.
mod common;

use common::process::{ServerProcess, run_to_exit};
use serde_json::{Value, json};

/// The card at `address`: v1.0 with `A2A-Version: 1.0`, else the merged v0.3 one.
async fn card(address: &str, v1: bool) -> Value {
    let mut request = reqwest::Client::new().get(format!("http://{address}/.well-known/agent-card.json"));
    if v1 {
        request = request.header("A2A-Version", "1.0");
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// `supportedInterfaces` as (binding, url).
fn interfaces(card: &Value) -> Vec<(String, String)> {
    card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["protocolBinding"].as_str().unwrap().to_owned(), i["url"].as_str().unwrap().to_owned()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

/// A server listing `interfaces` (the default without): it, its address, and the URL and gRPC
/// address its card names (`localhost` and its port, the defaults of --public-url and
/// --public-grpc).
fn server(interfaces: Option<&str>) -> (ServerProcess, String, String, String) {
    let mut args = vec!["--listen", "127.0.0.1:0"];
    if let Some(list) = interfaces {
        args.extend(["--card-interfaces", list]);
    }
    let server = ServerProcess::start(&args);
    let address = server.addr.clone();
    let port = address.rsplit(':').next().unwrap().to_owned();
    (server, address, format!("http://localhost:{port}"), format!("localhost:{port}"))
}

#[tokio::test]
async fn by_default_grpc_comes_first_as_host_port_and_v03_prefers_jsonrpc() {
    let (_server, address, url, grpc) = server(None);
    let v1 = card(&address, true).await;
    assert_eq!(
        interfaces(&v1),
        pairs(&[("GRPC", &grpc), ("JSONRPC", &format!("{url}/")), ("HTTP+JSON", &url)])
    );
    let v03 = card(&address, false).await;
    assert_eq!(v03["url"], format!("{url}/"), "v0.3's url stays an HTTP one");
    assert_eq!(v03["preferredTransport"], "JSONRPC");
    let transports: Vec<&str> = v03["additionalInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["transport"].as_str().unwrap())
        .collect();
    assert_eq!(transports, ["JSONRPC", "HTTP+JSON", "GRPC"]);
}

#[tokio::test]
async fn jsonrpc_and_http_json_only_for_adk_and_grpc_is_still_served() {
    let (server, address, url, _) = server(Some("jsonrpc,http-json"));
    let v1 = card(&address, true).await;
    assert_eq!(interfaces(&v1), pairs(&[("JSONRPC", &format!("{url}/")), ("HTTP+JSON", &url)]));
    // What ADK checks: every interface URL is http(s) on the card's origin.
    for (_, interface_url) in interfaces(&v1) {
        assert!(interface_url.starts_with(&url), "{interface_url}");
    }
    let v03 = card(&address, false).await;
    assert_eq!(v03["url"], format!("{url}/"));
    assert_eq!(v03["preferredTransport"], "JSONRPC");
    assert_eq!(
        v03["additionalInterfaces"],
        json!([{"url": format!("{url}/"), "transport": "JSONRPC"}, {"url": url, "transport": "HTTP+JSON"}])
    );
    let pure: Value = reqwest::get(format!("http://{address}/v1/card")).await.unwrap().json().await.unwrap();
    assert_eq!(pure["additionalInterfaces"], v03["additionalInterfaces"], "the pure v0.3 card too");

    // Not listed is not off: gRPC answers as before.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr)).unwrap();
    let mut client =
        a2a_server::proto::a2a_service_client::A2aServiceClient::new(channel.connect().await.unwrap());
    let task = common::send_task(&mut client, common::send("hello")).await;
    assert!(!task.id.is_empty());
}

#[tokio::test]
async fn the_order_given_is_the_order_listed_and_v03_follows() {
    let (_server, address, url, grpc) = server(Some("http-json,grpc"));
    let v1 = card(&address, true).await;
    assert_eq!(interfaces(&v1), pairs(&[("HTTP+JSON", &url), ("GRPC", &grpc)]));
    let v03 = card(&address, false).await;
    assert_eq!(v03["url"], url, "the first listed is v0.3's url");
    assert_eq!(v03["preferredTransport"], "HTTP+JSON");
    assert_eq!(
        v03["additionalInterfaces"],
        json!([{"url": url, "transport": "HTTP+JSON"}, {"url": grpc, "transport": "GRPC"}])
    );
}

#[test]
fn a_bad_list_stops_the_server_naming_the_flag() {
    for (list, expected) in [
        ("grpc,soap", "soap"),
        ("", "--card-interfaces"),
        ("jsonrpc,grpc,jsonrpc", "JSONRPC is listed twice"),
    ] {
        let (code, stderr) = run_to_exit(&["--listen", "127.0.0.1:0", "--card-interfaces", list]);
        assert_eq!(code, 2, "{list:?}: {stderr}");
        assert!(stderr.contains("--card-interfaces"), "{list:?}: {stderr}");
        assert!(stderr.contains(expected), "{list:?}: {stderr}");
    }
}
