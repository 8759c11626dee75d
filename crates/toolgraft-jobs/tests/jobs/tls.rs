//! TLS to the servers (feature `tls`), against servers started with
//! certificates the test makes (a CA of its own, `openssl`): a Redis that
//! speaks only TLS (`rediss://`), and a PostgreSQL with `ssl = on` checked by
//! `sslmode=verify-full`. The processes trust the test's CA as an operator's
//! would: Redis's roots through `SSL_CERT_FILE`, PostgreSQL's `sslrootcert=`.

use std::path::PathBuf;

use crate::support::*;

/// A CA of the test's own and a server certificate it signed, for 127.0.0.1.
struct Certificates {
    dir: PathBuf,
}

impl Certificates {
    fn make(test: &str) -> Self {
        let dir = std::env::temp_dir().join(unique(test));
        std::fs::create_dir_all(&dir).unwrap();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("the TLS tests need openssl");
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=toolgraft test CA",
        ]);
        std::fs::write(
            dir.join("san.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "1",
            "-extfile",
            "san.cnf",
        ]);
        Self { dir }
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `SSL_CERT_FILE`, for the processes that trust the test's CA.
const TRUST: &str = "SSL_CERT_FILE";

/// A caller process: calls `whereami_remote` once on `WORKER_URL`'s queue and
/// prints who answered, or why not.
#[test]
#[ignore = "a caller process: the TLS tests start it"]
fn tls_caller_process() {
    let (Ok(url), Ok(queue)) = (std::env::var(WORKER_URL), std::env::var(WORKER_QUEUE)) else {
        return;
    };
    let remote = Remote::new(url)
        .unwrap()
        .with_queue(queue)
        .unwrap()
        .with_timeout(Duration::from_secs(10));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        match toolset(&remote)
            .call("whereami_remote", json!({"city": "Oslo"}))
            .await
        {
            Ok(answer) => eprintln!("tls caller: answered by worker {}", report(answer).pid),
            Err(error) => eprintln!("tls caller: failed: {error}"),
        }
    });
}

/// A Redis that accepts only TLS: a worker and a caller that trust the test's
/// CA relocate a call through it; a caller that does not is refused, naming
/// the certificate; `redis://` to the same port gets no answer it can use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relocation_through_a_redis_that_speaks_only_tls() {
    let certificates = Certificates::make("redis_tls");
    let port = free_port();
    let tls_port = port.to_string();
    // `--port 0` after the helper's `--port`: no plain port, TLS only.
    let server = redis_on_with(
        port,
        &[
            "--port".as_ref(),
            "0".as_ref(),
            "--tls-port".as_ref(),
            tls_port.as_ref(),
            "--tls-cert-file".as_ref(),
            certificates.path("server.pem").as_ref(),
            "--tls-key-file".as_ref(),
            certificates.path("server.key").as_ref(),
            "--tls-ca-cert-file".as_ref(),
            certificates.path("ca.pem").as_ref(),
            "--tls-auth-clients".as_ref(),
            "no".as_ref(),
        ],
    )
    .await;
    let env = Env {
        url: format!("rediss://127.0.0.1:{port}"),
        queue: unique("redis_tls"),
        _guard: Guard::Server(server),
    };
    let ca = certificates.path("ca.pem");
    let worker = WorkerProcess::spawn(&env, "worker_process", &[(TRUST, &ca)]);
    let caller = WorkerProcess::spawn(&env, "tls::tls_caller_process", &[(TRUST, &ca)]);
    let answered = caller.wait_for_line(&["tls caller:"]).await;
    eprintln!("trusting the CA: {answered}");
    assert!(
        answered.contains(&format!("answered by worker {}", worker.pid())),
        "{answered}\n{}",
        worker.log_text()
    );

    let stranger = WorkerProcess::spawn(&env, "tls::tls_caller_process", &[(TRUST, "/dev/null")]);
    let refused = stranger.wait_for_line(&["tls caller:"]).await;
    eprintln!("not trusting it: {refused}");
    assert!(refused.contains("failed"), "{refused}");
    assert!(
        refused.to_lowercase().contains("certificate") || refused.contains("UnknownIssuer"),
        "the refusal names the certificate: {refused}"
    );

    let plain = Env {
        url: format!("redis://127.0.0.1:{port}"),
        queue: env.queue.clone(),
        _guard: Guard::None,
    };
    let error = toolset(&plain.remote().with_timeout(Duration::from_secs(3)))
        .call("whereami_remote", json!({"city": "Oslo"}))
        .await
        .unwrap_err();
    eprintln!("redis:// to the TLS port: {error}");
    assert!(
        !matches!(error, ToolError::TimedOut { .. }),
        "refused at connect, not a wait for the caller's timeout: {error}"
    );
}

/// A PostgreSQL with `ssl = on`: a caller and a worker that check its
/// certificate (`sslmode=verify-full`, `sslrootcert=` the test's CA) relocate a
/// call; the server says their connections are TLS (`pg_stat_ssl`).
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relocation_through_postgres_over_tls() {
    let certificates = Certificates::make("postgres_tls");
    let env = Env::postgres_of_its_own("postgres_tls").await;
    let Guard::Postgres(dir) = &env._guard else {
        unreachable!()
    };
    // The server reads its key only if the key is its own and private.
    let data = dir.join("data");
    for file in ["server.pem", "server.key"] {
        std::fs::copy(certificates.dir.join(file), data.join(file)).unwrap();
        let owned = Command::new("chown")
            .arg("--reference")
            .arg(&data)
            .arg(data.join(file))
            .status()
            .unwrap();
        assert!(owned.success());
    }
    std::fs::set_permissions(
        data.join("server.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let admin = sqlx::PgPool::connect(&env.url).await.unwrap();
    for setting in [
        "ALTER SYSTEM SET ssl_cert_file = 'server.pem'",
        "ALTER SYSTEM SET ssl_key_file = 'server.key'",
        "ALTER SYSTEM SET ssl = on",
    ] {
        sqlx::query(setting).execute(&admin).await.unwrap();
    }
    let reloaded: bool = sqlx::query_scalar("SELECT pg_reload_conf()")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(reloaded);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let checked = Env {
        url: format!(
            "{}?sslmode=verify-full&sslrootcert={}",
            env.url,
            certificates.path("ca.pem")
        ),
        queue: env.queue.clone(),
        _guard: Guard::None,
    };
    let worker = WorkerProcess::start(&checked);
    let answer = toolset(&checked.remote())
        .call("whereami_remote", json!({"city": "Oslo"}))
        .await
        .unwrap_or_else(|error| panic!("{error}\n{}", worker.log_text()));
    assert_eq!(report(answer).pid, worker.pid());
    let (tls, plain): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE ssl.ssl), count(*) FILTER (WHERE NOT ssl.ssl)
         FROM pg_stat_ssl AS ssl JOIN pg_stat_activity AS activity USING (pid)
         WHERE activity.application_name = 'toolgraft'",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    eprintln!("the server's toolgraft connections: {tls} over TLS, {plain} not");
    assert!(tls > 0 && plain == 0, "{tls} over TLS, {plain} not");

    // A CA that did not sign the server's certificate: refused, naming why.
    let stranger = Env {
        url: format!(
            "{}?sslmode=verify-full&sslrootcert=/etc/ssl/certs/ca-certificates.crt",
            env.url
        ),
        queue: env.queue.clone(),
        _guard: Guard::None,
    };
    let error = toolset(&stranger.remote().with_timeout(Duration::from_secs(5)))
        .call("whereami_remote", json!({"city": "Oslo"}))
        .await
        .unwrap_err();
    eprintln!("a CA that did not sign it: {error}");
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "{error}"
    );
}
