//! The LISTEN task: other nodes' notifications, passed on as wake-ups.

use super::conn::describe;
use super::sql;
use super::tls::DbConfig;
use redial_store::Wake;
use tokio::sync::broadcast;

/// Listens for other nodes' notifications and passes them on; reconnects when the connection
/// drops, and then says `All` (notifications may have been missed meanwhile).
pub(crate) async fn listen(config: DbConfig, channel: String, wakes: broadcast::Sender<Wake>) {
    use futures_util::StreamExt;
    let mut first = true;
    loop {
        match config.connect().await {
            Ok((client, mut connection)) => {
                let mut messages =
                    futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                let sql = format!("LISTEN \"{channel}\"");
                let ok = {
                    let listening = client.batch_execute(&sql);
                    // The LISTEN is answered through the connection, which the stream drives.
                    tokio::pin!(listening);
                    loop {
                        tokio::select! {
                            r = &mut listening => break r.is_ok(),
                            m = messages.next() => if m.is_none() { break false; },
                        }
                    }
                };
                if ok {
                    if !first {
                        let _ = wakes.send(Wake::All);
                    }
                    first = false;
                    while let Some(m) = messages.next().await {
                        match m {
                            Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                                let wake = match n.payload() {
                                    "" => Wake::All,
                                    sql::ENDPOINTS_CHANGED => Wake::Endpoints,
                                    queue => Wake::Queue(queue.to_owned()),
                                };
                                let _ = wakes.send(wake);
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(error = %describe(&e), "the PostgreSQL listener failed");
                                break;
                            }
                        }
                    }
                }
                drop(client);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot connect the PostgreSQL listener; retrying");
            }
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
