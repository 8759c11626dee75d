//! The Redis servers the Redis tier takes and the ones it refuses at connect,
//! with an error that says why: a Redis Cluster node (the engine's scripts move
//! several keys of a queue at once, which a cluster keeps in different slots).

use crate::support::*;

/// A caller and a worker on a Redis Cluster node are refused at connect, with
/// the reason, not failed later by a script's CROSSSLOT error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_node_is_refused_at_connect_with_the_reason() {
    let dir = std::env::temp_dir().join(unique("cluster"));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    // The cluster bus's port, named: without it the bus takes the port plus
    // 10,000, and a server on a port above 55,535 refuses to start.
    let bus = free_port().to_string();
    let config = dir.join("nodes.conf");
    let arguments: [&std::ffi::OsStr; 8] = [
        "--cluster-enabled".as_ref(),
        "yes".as_ref(),
        "--cluster-port".as_ref(),
        bus.as_ref(),
        "--cluster-config-file".as_ref(),
        config.as_os_str(),
        "--dir".as_ref(),
        dir.as_os_str(),
    ];
    let server = redis_on_with(port, &arguments).await;
    // Stopped when the test ends, passed or failed.
    let _server = Guard::Server(server);
    let url = format!("redis://127.0.0.1:{port}");
    let remote = Remote::new(&url)
        .unwrap()
        .with_queue(unique("cluster"))
        .unwrap();

    let refused = toolset(&remote)
        .call("slow_remote", json!({"ms": 0}))
        .await
        .unwrap_err();
    eprintln!("the caller: {refused}");
    let reason = refused.to_string();
    assert!(
        matches!(refused, ToolError::Relocation { .. }),
        "{refused:?}"
    );
    assert!(reason.contains("Redis Cluster"), "{reason}");
    assert!(reason.contains("standalone"), "{reason}");

    let worker = Worker::new(toolset(&remote), &remote)
        .run_until(std::future::pending())
        .await
        .unwrap_err();
    eprintln!("the worker: {worker}");
    assert!(worker.to_string().contains("Redis Cluster"), "{worker}");

    let _ = std::fs::remove_dir_all(&dir);
}
