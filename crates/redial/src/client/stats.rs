//! `redial stats`: jobs counted by queue, state and category, and by endpoint.

use super::{or_dash, print_json, Conn};
use crate::human::{self, say, OutputArgs};
use anyhow::Result;

#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn stats(a: StatsArgs) -> Result<()> {
    let server = a.conn.connect()?;
    let out = server.ask(server.client.stats()).await?;
    if a.out.json() {
        return print_json(&out);
    }
    let queues: Vec<Vec<String>> = out
        .queues
        .iter()
        .map(|c| {
            vec![
                c.queue.clone(),
                c.state.to_string(),
                or_dash(c.category.as_ref()),
                c.count.to_string(),
            ]
        })
        .collect();
    say!(
        "{}",
        human::table(
            &["QUEUE", "STATE", "CATEGORY", "COUNT"],
            &queues,
            &["COUNT"]
        )
    );
    say!();
    let endpoints: Vec<Vec<String>> = out
        .endpoints
        .iter()
        .map(|c| vec![c.endpoint.clone(), c.state.to_string(), c.count.to_string()])
        .collect();
    say!(
        "{}",
        human::table(&["ENDPOINT", "STATE", "COUNT"], &endpoints, &["COUNT"])
    );
    Ok(())
}
