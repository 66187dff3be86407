//! How clap reads the library's enums on the command line (their kebab-case names and help).
use clap::ValueEnum;

use crate::agent::exec::{InputFormat, StdinMode};
use crate::card::Binding;
use crate::push::PushEvents;
use crate::server::ClientAuth;
use crate::ui::UiMode;

/// Lets clap parse an enum of the library by its kebab-case names, so that the library's
/// modules need not derive a command-line trait: the CLI is this module's concern alone.
macro_rules! cli_values {
    ($ty:ident { $($variant:ident => $name:literal: $help:literal),+ $(,)? }) => {
        impl ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($ty::$variant),+]
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                Some(match self {
                    $($ty::$variant => clap::builder::PossibleValue::new($name).help($help)),+
                })
            }
        }
    };
}

cli_values!(Binding {
    Grpc => "grpc": "gRPC, as host:port (--public-grpc)",
    JsonRpc => "jsonrpc": "JSON-RPC 2.0, at --public-url's /",
    HttpJson => "http-json": "HTTP+JSON, at --public-url",
});
cli_values!(ClientAuth {
    Required => "required": "The handshake fails without a client certificate",
    Optional => "optional": "A client may connect without a certificate",
});
cli_values!(PushEvents {
    All => "all": "Every status and artifact update",
    State => "state": "Status updates only",
});
cli_values!(UiMode {
    Auto => "auto": "Only when the HTTP listener is on a loopback address",
    On => "on": "Always",
    Off => "off": "Never",
});
cli_values!(InputFormat {
    Text => "text": "The message's text parts, joined with newlines, ending with a newline",
    Json => "json": "The whole message as one line of A2A (Proto)JSON",
});
cli_values!(StdinMode {
    Close => "close": "Stdin closes after the first message: the command sees end of input",
    Open => "open": "Stdin stays open; each later message on the task is written to it",
});
