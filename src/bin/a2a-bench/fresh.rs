//! Scenarios that need servers of their own, started fresh from the recipe of the one the
//! benchmark spawned: memory (RSS deltas only see new pages, so earlier scenarios' freed heap
//! must not be there to reuse), hibernate, list-stall and auth (servers with other flags).
use crate::driver::Target;
use crate::report::Measured;
use crate::{BoxError, RunState, Server, auth, list_stall, memory, scenarios};

/// The memory scenario on one server: on a fresh instance when the benchmark started the
/// server, because RSS deltas only see new pages and the earlier scenarios leave freed heap
/// behind that new tasks would quietly reuse; on the server itself otherwise (with a note if
/// this run already used its heap).
///
/// `measure` gets the server's target and PID: the `memory` or the `running` scenario.
pub async fn memory_on<F, Fut>(
    server: &Server,
    label: &str,
    heap_used: bool,
    measure: F,
) -> Result<Option<Measured>, BoxError>
where
    F: Fn(Target, u32) -> Fut,
    Fut: Future<Output = Result<Measured, BoxError>>,
{
    if let Some(fresh) = server.fresh(&format!("a fresh {label} for a memory scenario")).await? {
        let result = match fresh.pid {
            Some(pid) => measure(fresh.target.clone(), pid).await,
            None => Err("the fresh server has no PID".into()),
        };
        fresh.stop().await;
        return result.map(Some);
    }
    let Some(pid) = server.pid else { return Ok(None) };
    let mut measured = measure(server.target.clone(), pid).await?;
    if heap_used {
        measured.notes.push(
            "measured on a server that already ran other scenarios: freed heap gets reused, so the \
         per-item figures may be low (run the memory scenarios alone on a fresh server)"
                .into(),
        );
    }
    Ok(Some(measured))
}

/// The hibernate scenario on a fresh instance of our server with a short idle timeout; skipped
/// (with a note) for a server this run did not start.
pub async fn hibernate_on(server: &Server, p: &memory::MemoryParams) -> Result<Option<Measured>, BoxError> {
    let idle = memory::IDLE_SECS.to_string();
    let extra = ["--task-idle-secs", idle.as_str()];
    let Some(fresh) = server.fresh_with(&extra, "a fresh ours for the hibernate scenario").await? else {
        return Err("needs --spawn-server (a server started with --task-idle-secs)".into());
    };
    let result = match fresh.pid {
        Some(pid) => memory::hibernated(&fresh.target, pid, p).await,
        None => Err("the fresh server has no PID".into()),
    };
    fresh.stop().await;
    result.map(Some)
}

/// The list-stall scenario on a fresh instance of our server that retains every task it stores.
pub async fn list_stall_on(
    server: &Server,
    p: &list_stall::ListStallParams,
) -> Result<Option<Measured>, BoxError> {
    let extra = p.server_args();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let Some(fresh) = server.fresh_with(&extra, "a fresh ours for the list-stall scenario").await? else {
        return Err("needs --spawn-server (a server retaining every task it stores)".into());
    };
    let result = list_stall::list_stall(&fresh.target, fresh.pid, p).await;
    fresh.stop().await;
    result.map(Some)
}

/// The auth scenario: each kind of credential on a fresh server (one without `--auth` for
/// "none", one with the generated auth file for the others), a row each.
pub async fn auth_on(
    server: &Server,
    p: &scenarios::UnaryParams,
    run: &mut RunState,
) -> Vec<(&'static str, Option<Measured>)> {
    let servers = async {
        let setup = auth::AuthSetup::create()?;
        let args: Vec<&str> = setup.server_args.iter().map(String::as_str).collect();
        let plain = server.fresh("a fresh ours without --auth").await?;
        let authed = server.fresh_with(&args, "a fresh ours with --auth").await?;
        match (plain, authed) {
            (Some(plain), Some(authed)) => Ok((setup, plain, authed)),
            _ => Err(BoxError::from("needs --spawn-server (servers started with and without --auth)")),
        }
    };
    let (setup, plain, authed) = match servers.await {
        Ok(servers) => servers,
        Err(error) => {
            run.ours_only("auth", Err(error));
            return Vec::new();
        }
    };
    let mut rows = Vec::new();
    for kind in auth::KINDS {
        let on = if kind == "none" { &plain } else { &authed };
        eprintln!("a2a-bench: auth ({kind}) …");
        let measured = auth::measure(&on.target, on.pid, &setup, kind, p).await.map(Some);
        rows.push((kind, run.ours_only(&format!("auth ({kind})"), measured)));
    }
    plain.stop().await;
    authed.stop().await;
    rows
}
