//! The whole HTTP side in-process, every binding picked by the input itself: a raw request
//! (`METHOD TARGET`, header lines, an empty line, the body; see `a2a_fuzz::server`) goes
//! through the server's router (auth layer, CORS, gRPC and grpc-web, JSON-RPC, HTTP+JSON, the
//! v0.3 shims, the card, the dashboard) to the core, and its answer must be well-formed in its
//! binding's terms (`a2a_fuzz::response`), never a 5xx, a hang or a panic.
#![no_main]
use a2a_fuzz::response;
use a2a_fuzz::server::Harness;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &[u8]| {
    if let Some((sent, reply)) = Harness::get().run_raw(raw) {
        response::check(&sent, &reply);
    }
});
