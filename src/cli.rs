//! Command-line interface. Every option is also read from a `WARDEN_*`
//! environment variable so a deployment can be configured either way.
//!
//! One file of ~900 lines on purpose: it is one concern, the clap
//! definitions of every command and setting with their help texts (what
//! `warden --help` prints), read top to bottom as the operator's manual.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "warden",
    version,
    about = "Warden: a conversational agent that calls your own HTTP endpoints safely",
    long_about = "Warden serves the conversational agent public API (contract 7.0.0) and \
                  offers operator commands for accounts and API keys.\n\n\
                  Every option can also be given as the environment variable shown next to it.\n\
                  Start with `warden serve`; create an account with `warden admin account create NAME` \
                  and an API key with `warden admin key issue NAME`."
)]
pub struct Cli {
    #[command(flatten)]
    pub database: DatabaseArgs,

    #[command(flatten)]
    pub master_key: MasterKeyArgs,

    #[command(flatten)]
    pub log: LogArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Where the data lives; shared by `serve` and `admin` so both see the same accounts.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Database URL: `sqlite://PATH` (created and migrated on first start) or
    /// `postgres://USER@HOST/DB` for several replicas sharing one database.
    #[arg(
        long,
        env = "WARDEN_DATABASE_URL",
        default_value = "sqlite://warden.db",
        global = true
    )]
    pub database_url: String,

    /// Name of this deployment's environment. API keys are issued for one
    /// environment and are refused (401) by a server of another.
    #[arg(
        long,
        env = "WARDEN_ENVIRONMENT",
        default_value = "local",
        global = true
    )]
    pub environment: String,
}

#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log filter, in `tracing` EnvFilter syntax (for example `info` or `warden=debug,info`).
    #[arg(
        long = "log",
        env = "WARDEN_LOG",
        default_value = "info",
        global = true
    )]
    pub filter: String,

    /// Log line format. Logs always go to standard error.
    #[arg(long, env = "WARDEN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

// Parsed once per process: the size of the `serve` variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API server until SIGTERM or SIGINT (in-flight requests finish first).
    Serve(ServeArgs),
    /// Operator commands. Output is one JSON object on standard output; on
    /// failure a message goes to standard error and the exit code is non-zero.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Print the OpenAPI 3.1 document of the API (the one `GET /openapi.json`
    /// serves; `docs/openapi.json` is this output).
    Openapi,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address and port to listen on.
    #[arg(long, env = "WARDEN_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub sandbox: SandboxArgs,

    #[command(flatten)]
    pub planner: PlannerArgs,

    #[command(flatten)]
    pub limits: ClientLimits,

    #[command(flatten)]
    pub platform: PlatformArgs,

    #[command(flatten)]
    pub prompt: PromptArgs,

    #[command(flatten)]
    pub mcp: McpArgs,

    #[command(flatten)]
    pub retention: RetentionArgs,

    /// Serve an interactive API reference (Swagger UI, embedded in the
    /// binary) at `/docs`. Off by default.
    #[arg(long, env = "WARDEN_DOCS_UI", default_value_t = false)]
    pub docs_ui: bool,

    /// Serve Prometheus metrics (`GET /metrics`, text format) on this
    /// address and port, a listener of its own apart from the API (for
    /// example 127.0.0.1:9464; keep it off the public network). Off when
    /// unset: then no metric is recorded at all.
    #[arg(long, env = "WARDEN_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
}

/// `ServeArgs` built in code (tests and benchmarks run the server in
/// process): [`ServeArgs::local`] and one `with_…` per part to change.
impl ServeArgs {
    /// Listens on 127.0.0.1 port 0 (the system picks a free port), with
    /// every other setting at its default: the embedded guest, compiled at
    /// start; the built-in planner; the default client limits; no platform
    /// channel, no prompt verifier, no docs UI.
    pub fn local() -> Self {
        ServeArgs {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            sandbox: SandboxArgs::default(),
            planner: PlannerArgs::default(),
            limits: ClientLimits::default(),
            platform: PlatformArgs::default(),
            prompt: PromptArgs::default(),
            mcp: McpArgs::default(),
            retention: RetentionArgs::default(),
            docs_ui: false,
            metrics_listen: None,
        }
    }

    /// Runs the policy guest component at `path` instead of the embedded one.
    pub fn with_policy_guest(mut self, path: PathBuf) -> Self {
        self.sandbox.policy_guest = Some(path);
        self
    }

    /// Keeps compiled guests in `dir`, so each new server skips compiling.
    pub fn with_guest_cache(mut self, dir: PathBuf) -> Self {
        self.sandbox.guest_cache_dir = Some(dir);
        self
    }

    /// DEVELOPMENT ONLY (`WARDEN_DEV_ALLOW_LOOPBACK`): capability URLs on loopback.
    pub fn with_loopback_endpoints(mut self, allow: bool) -> Self {
        self.sandbox.dev_allow_loopback = allow;
        self
    }

    pub fn with_planner(mut self, planner: PlannerArgs) -> Self {
        self.planner = planner;
        self
    }

    pub fn with_limits(mut self, limits: ClientLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn with_platform(mut self, platform: PlatformArgs) -> Self {
        self.platform = platform;
        self
    }

    pub fn with_prompt(mut self, prompt: PromptArgs) -> Self {
        self.prompt = prompt;
        self
    }

    pub fn with_mcp(mut self, mcp: McpArgs) -> Self {
        self.mcp = mcp;
        self
    }

    pub fn with_retention(mut self, retention: RetentionArgs) -> Self {
        self.retention = retention;
        self
    }
}

/// How long stored data is kept (SECURITY.md, "Data lifecycle"). The
/// hourly purge of every replica removes what expired, in batches.
#[derive(Debug, Clone, Args)]
pub struct RetentionArgs {
    /// Days a conversation (its messages, interactions, pending operation
    /// and references) is kept after its last activity; then it is deleted
    /// and its id answers as unknown. `off` keeps conversations until they
    /// are erased (`warden admin data erase`) or their account is deleted.
    /// 0 is refused (it would keep nothing); the smallest is 1.
    #[arg(long, env = "WARDEN_CONVERSATION_RETENTION_DAYS", default_value = "90")]
    pub conversation_retention_days: RetentionDays,

    /// Days the message text of a capability-gap event (kept only under an
    /// account's `text` diagnostic mode) is kept; the event itself stays as
    /// metadata. Never longer than its conversation: the text goes when the
    /// conversation is purged or erased. `off`: as long as the conversation.
    #[arg(long, env = "WARDEN_GAP_TEXT_RETENTION_DAYS", default_value = "30")]
    pub gap_text_retention_days: RetentionDays,

    /// Days records without user text are kept: the MCP call audit trail,
    /// contract-test records and prompt-integration usage and quota rows.
    /// `off` keeps them until their account is deleted.
    #[arg(long, env = "WARDEN_AUDIT_RETENTION_DAYS", default_value = "180")]
    pub audit_retention_days: RetentionDays,

    /// Rows (conversations, with their messages) one purge transaction
    /// deletes before letting turns write again (1 to 10,000).
    #[arg(long, env = "WARDEN_RETENTION_BATCH", default_value_t = RetentionArgs::DEFAULT_BATCH,
          value_parser = clap::value_parser!(i64).range(1..=10_000))]
    pub retention_batch: i64,
}

impl RetentionArgs {
    pub const DEFAULT_BATCH: i64 = 100;
}

impl Default for RetentionArgs {
    fn default() -> Self {
        RetentionArgs {
            conversation_retention_days: RetentionDays(Some(90)),
            gap_text_retention_days: RetentionDays(Some(30)),
            audit_retention_days: RetentionDays(Some(180)),
            retention_batch: Self::DEFAULT_BATCH,
        }
    }
}

/// A retention in whole days (1 to 36,500), or `off`: no age limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionDays(pub Option<u32>);

impl std::str::FromStr for RetentionDays {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "off" => Ok(RetentionDays(None)),
            "0" => Err("0 days would keep nothing; use `off` for no limit, or 1 or more".into()),
            days => match days.parse::<u32>() {
                Ok(n @ 1..=36_500) => Ok(RetentionDays(Some(n))),
                _ => Err(format!(
                    "{days:?} is not a number of days (1 to 36500) or `off`"
                )),
            },
        }
    }
}

/// The MCP server at `/v1/mcp` (issue 27).
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// Origins allowed to call `/v1/mcp` from a browser, comma-separated and
    /// exact (`https://app.example.com`). A request carrying any other
    /// `Origin` is refused with 403 (the transport's DNS-rebinding rule);
    /// requests without `Origin` (every non-browser client) are not affected.
    #[arg(long, env = "WARDEN_MCP_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub mcp_allowed_origins: Vec<String>,

    /// Tool calls one account may have in progress at once on this replica;
    /// beyond it a call is answered 429 with `Retry-After` (0: no limit).
    #[arg(long, env = "WARDEN_MCP_MAX_CONCURRENT_PER_ACCOUNT", default_value_t = McpArgs::DEFAULT_MAX_CONCURRENT_PER_ACCOUNT)]
    pub mcp_max_concurrent_per_account: usize,
}

impl McpArgs {
    /// Tool calls in progress per account and replica, by default.
    pub const DEFAULT_MAX_CONCURRENT_PER_ACCOUNT: usize = 16;
}

impl Default for McpArgs {
    fn default() -> Self {
        McpArgs {
            mcp_allowed_origins: Vec::new(),
            mcp_max_concurrent_per_account: McpArgs::DEFAULT_MAX_CONCURRENT_PER_ACCOUNT,
        }
    }
}

/// Prompt integrations (contract 2.13, 4.4): the challenge verifier the
/// execute route asks, and which client address its burst limit counts.
/// Without a verify URL and secret every execute answers 503 (no token
/// can be checked); the operator commands work regardless.
#[derive(Debug, Clone, Args)]
pub struct PromptArgs {
    /// A siteverify-compatible endpoint (Cloudflare Turnstile's protocol),
    /// e.g. https://challenges.cloudflare.com/turnstile/v0/siteverify.
    #[arg(long, env = "WARDEN_CHALLENGE_VERIFY_URL")]
    pub challenge_verify_url: Option<String>,

    /// The verifier's secret (sent only to the verifier; never logged).
    #[arg(long, env = "WARDEN_CHALLENGE_SECRET", hide_env_values = true)]
    pub challenge_secret: Option<String>,

    /// Deadline of one verification, in milliseconds.
    #[arg(long, env = "WARDEN_CHALLENGE_TIMEOUT_MS", default_value_t = 5_000)]
    pub challenge_timeout_ms: u64,

    /// A request header holding the client's IP address as your proxy
    /// writes it (e.g. X-Forwarded-For or CF-Connecting-IP); set it only
    /// behind such a proxy. Unset: the connection's peer address is the
    /// client's. The burst limit counts an IPv4 address, or an IPv6 /64.
    #[arg(long, env = "WARDEN_CLIENT_IP_HEADER")]
    pub client_ip_header: Option<String>,

    /// Which value of that header is the client's, counted from the right:
    /// proxies append the address they saw, so with one trusted proxy in
    /// front it is the last (1); with two chained proxies, 2. Values left
    /// of it are the client's own words and are never used.
    #[arg(long, env = "WARDEN_CLIENT_IP_HOPS", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=16))]
    pub client_ip_hops: u8,
}

impl Default for PromptArgs {
    fn default() -> Self {
        PromptArgs {
            challenge_verify_url: None,
            challenge_secret: None,
            challenge_timeout_ms: 5_000,
            client_ip_header: None,
            client_ip_hops: 1,
        }
    }
}

/// What a prompt integration's public bundle points at: printed by the
/// operator commands, for the page that renders the form.
#[derive(Debug, Clone, Default, Args)]
pub struct BundleArgs {
    /// The challenge widget's site key (public), printed in each bundle.
    #[arg(long, env = "WARDEN_CHALLENGE_SITEKEY", default_value = "")]
    pub challenge_sitekey: String,

    /// The base URL browsers reach this service at, for the bundle's
    /// `endpoint` (e.g. https://warden.example.com).
    #[arg(
        long,
        env = "WARDEN_PUBLIC_BASE_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub public_base_url: String,
}

/// The messaging-platform channel (contract 2.12, 4.3): the webhook's two
/// secrets and the send API the worker replies through. Without the verify
/// token and the app secret the channel is off and its routes answer 404.
#[derive(Debug, Clone, Args)]
pub struct PlatformArgs {
    /// The token the platform sends in the webhook handshake (`hub.verify_token`).
    #[arg(long, env = "WARDEN_WEBHOOK_VERIFY_TOKEN", hide_env_values = true)]
    pub webhook_verify_token: Option<String>,

    /// The app secret that keys `X-Hub-Signature-256` (HMAC-SHA256 of the raw body).
    #[arg(long, env = "WARDEN_WEBHOOK_APP_SECRET", hide_env_values = true)]
    pub webhook_app_secret: Option<String>,

    /// Base URL of the platform's send API, including its version segment;
    /// replies go to `{base}/{phone_number_id}/messages`. https only, except
    /// loopback under WARDEN_DEV_ALLOW_LOOPBACK.
    #[arg(long, env = "WARDEN_PLATFORM_API_URL", default_value = PlatformArgs::DEFAULT_API_URL)]
    pub platform_api_url: String,

    /// Access token for the send API, used for numbers registered without one
    /// (`warden admin webhook register --access-token-file`). Never logged.
    #[arg(long, env = "WARDEN_PLATFORM_ACCESS_TOKEN", hide_env_values = true)]
    pub platform_access_token: Option<String>,

    /// Send attempts per message before it is dead-lettered.
    #[arg(long, env = "WARDEN_PLATFORM_MAX_ATTEMPTS", default_value_t = PlatformArgs::DEFAULT.platform_max_attempts)]
    pub platform_max_attempts: u32,

    /// First retry delay in milliseconds; it doubles per attempt (at most 5 minutes).
    #[arg(long, env = "WARDEN_PLATFORM_RETRY_BASE_MS", default_value_t = PlatformArgs::DEFAULT.platform_retry_base_ms)]
    pub platform_retry_base_ms: u64,

    /// How long a worker's claim on a message lasts, in milliseconds; a claim
    /// of a crashed server is taken over once it lapses.
    #[arg(long, env = "WARDEN_PLATFORM_LEASE_MS", default_value_t = PlatformArgs::DEFAULT.platform_lease_ms)]
    pub platform_lease_ms: u64,

    /// Deadline of one call to the send API, in milliseconds.
    #[arg(long, env = "WARDEN_PLATFORM_SEND_TIMEOUT_MS", default_value_t = PlatformArgs::DEFAULT.platform_send_timeout_ms)]
    pub platform_send_timeout_ms: u64,

    /// Worker tasks per server; each claims one message at a time.
    #[arg(long, env = "WARDEN_PLATFORM_WORKERS", default_value_t = PlatformArgs::DEFAULT.platform_workers)]
    pub platform_workers: usize,

    /// Unfinished messages (queued or awaiting their send) one number may
    /// hold; past it the webhook answers 503 with `Retry-After` and the
    /// platform delivers again later. At least 1.
    #[arg(long, env = "WARDEN_PLATFORM_QUEUE_PER_NUMBER", default_value_t = PlatformArgs::DEFAULT.platform_queue_per_number)]
    pub platform_queue_per_number: u32,
}

impl PlatformArgs {
    pub const DEFAULT_API_URL: &'static str = "https://graph.facebook.com/v21.0";
    pub const DEFAULT: PlatformArgs = PlatformArgs {
        webhook_verify_token: None,
        webhook_app_secret: None,
        platform_api_url: String::new(),
        platform_access_token: None,
        platform_max_attempts: 8,
        platform_retry_base_ms: 1_000,
        platform_lease_ms: 120_000,
        platform_send_timeout_ms: 10_000,
        platform_workers: 2,
        platform_queue_per_number: 1_000,
    };
}

impl Default for PlatformArgs {
    fn default() -> Self {
        PlatformArgs {
            platform_api_url: Self::DEFAULT_API_URL.to_owned(),
            ..Self::DEFAULT
        }
    }
}

/// Bounds on what one client can hold: connections, time to send a request,
/// time a request may take, work left running after a hang-up, and how long
/// a shutdown waits. A slow, idle, hung-up or numerous client can never keep
/// a worker, a connection slot or a database lock beyond these, and one
/// address or account never holds more than its share (SECURITY.md lists
/// each limit with the test that proves it).
#[derive(Debug, Clone, Args)]
pub struct ClientLimits {
    /// Most connections served at once; further clients wait in the listen
    /// backlog until a connection closes. At the cap, one connection per
    /// waiting client ends its keep-alive: the one idle longest closes at
    /// once if idle for 250 ms, else the next to answer closes after it.
    #[arg(long, env = "WARDEN_MAX_CONNECTIONS", default_value_t = ClientLimits::DEFAULT.max_connections)]
    pub max_connections: usize,

    /// Most connections one client address holds at once (an IPv4 address,
    /// or an IPv6 /64); beyond it a new connection is closed before anything
    /// is read from it. 0 turns the limit off: do that behind a proxy or a
    /// load balancer, where every connection comes from its address.
    #[arg(long, env = "WARDEN_MAX_CONNECTIONS_PER_CLIENT", default_value_t = ClientLimits::DEFAULT.max_connections_per_client)]
    pub max_connections_per_client: usize,

    /// Largest request head (request line and headers) a client may send,
    /// in bytes, and so the most a connection buffers: 431 beyond it. At
    /// least 8192.
    #[arg(long, env = "WARDEN_MAX_HEADER_BYTES", default_value_t = ClientLimits::DEFAULT.max_header_bytes,
          value_parser = clap::builder::TypedValueParser::map(
              clap::value_parser!(u32).range(8192..=1_048_576), |v| v as usize))]
    pub max_header_bytes: usize,

    /// Time a client has to send a request's headers, in milliseconds. It also
    /// closes keep-alive connections that stay idle this long.
    #[arg(long, env = "WARDEN_HEADER_READ_TIMEOUT_MS", default_value_t = ClientLimits::DEFAULT.header_read_timeout_ms)]
    pub header_read_timeout_ms: u64,

    /// Time a client has to send a whole request body once its headers are
    /// in, in milliseconds (a trickling upload is cut off: 408).
    #[arg(long, env = "WARDEN_BODY_READ_TIMEOUT_MS", default_value_t = ClientLimits::DEFAULT.body_read_timeout_ms)]
    pub body_read_timeout_ms: u64,

    /// Time an answer may wait for the client to read it, in milliseconds:
    /// a connection whose writes make no progress this long (a client that
    /// stopped reading) is closed.
    #[arg(long, env = "WARDEN_WRITE_TIMEOUT_MS", default_value_t = ClientLimits::DEFAULT.write_timeout_ms)]
    pub write_timeout_ms: u64,

    /// Requests one connection may carry; the answer to the last says
    /// `connection: close`.
    #[arg(long, env = "WARDEN_MAX_REQUESTS_PER_CONNECTION", default_value_t = ClientLimits::DEFAULT.max_requests_per_connection)]
    pub max_requests_per_connection: u64,

    /// How long one connection may be kept alive, in milliseconds; after
    /// it, the request in progress is answered and the connection closed.
    #[arg(long, env = "WARDEN_CONNECTION_LIFETIME_MS", default_value_t = ClientLimits::DEFAULT.connection_lifetime_ms)]
    pub connection_lifetime_ms: u64,

    /// Deadline of a whole request, in milliseconds, after which the client
    /// gets 503 (the work started still finishes or rolls back on its own).
    /// A message turn is bounded by its own budget instead (planner and call
    /// time-outs); see docs/contract-decisions.md.
    #[arg(long, env = "WARDEN_REQUEST_TIMEOUT_MS", default_value_t = ClientLimits::DEFAULT.request_timeout_ms)]
    pub request_timeout_ms: u64,

    /// Most requests being worked on at once, whether or not their clients
    /// are still connected (a hung-up request's work runs to its end and
    /// keeps its place until then). Beyond it a request is answered 503 with
    /// `Retry-After` before any work starts. Health and the key set are
    /// never refused.
    #[arg(long, env = "WARDEN_MAX_IN_FLIGHT", default_value_t = ClientLimits::DEFAULT.max_in_flight)]
    pub max_in_flight: usize,

    /// Most requests of one account being worked on at once (same rules as
    /// WARDEN_MAX_IN_FLIGHT), so one tenant's slow endpoint cannot take
    /// every place.
    #[arg(long, env = "WARDEN_MAX_IN_FLIGHT_PER_ACCOUNT", default_value_t = ClientLimits::DEFAULT.max_in_flight_per_account)]
    pub max_in_flight_per_account: usize,

    /// Most requests using this server's own resources (CPU, database,
    /// policy guest) at once; unset, 16 per CPU the process may use. A
    /// request waiting for a host endpoint, the model, the challenge verifier
    /// or its own client's body gives its place up while it waits. At most
    /// four new requests per place wait for one. Past capacity this keeps
    /// admitted requests fast: the excess is answered 503 with
    /// `Retry-After` at once (docs/benchmarks.md, "Past capacity").
    #[arg(long, env = "WARDEN_MAX_LOCAL_WORK", value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_local_work: Option<u32>,

    /// How long a new request may wait for a place among those using local
    /// resources (WARDEN_MAX_LOCAL_WORK) while the server sheds load, in
    /// milliseconds, before it is refused with 503 and `Retry-After`; 0
    /// (the default): refused at once. It sheds once a queue stands (every
    /// admission of a 100 ms interval waited longer than 5 ms, or a request
    /// waited 100 ms in vain, or one found the queue of waiting requests
    /// full) until 100 ms pass without a refusal; otherwise a request may
    /// wait up to 100 ms (a burst).
    #[arg(long, env = "WARDEN_ADMISSION_WAIT_MS", default_value_t = ClientLimits::DEFAULT.admission_wait_ms)]
    pub admission_wait_ms: u64,

    /// On SIGTERM or SIGINT, how long in-flight requests get to finish, in
    /// milliseconds, before the remaining connections are closed.
    #[arg(long, env = "WARDEN_SHUTDOWN_GRACE_MS", default_value_t = ClientLimits::DEFAULT.shutdown_grace_ms)]
    pub shutdown_grace_ms: u64,
}

impl ClientLimits {
    pub const DEFAULT: ClientLimits = ClientLimits {
        max_connections: 1024,
        max_connections_per_client: 64,
        max_header_bytes: 32 * 1024,
        header_read_timeout_ms: 10_000,
        body_read_timeout_ms: 30_000,
        write_timeout_ms: 10_000,
        max_requests_per_connection: 1_000,
        connection_lifetime_ms: 300_000,
        request_timeout_ms: 30_000,
        max_in_flight: 512,
        max_in_flight_per_account: 128,
        max_local_work: None,
        admission_wait_ms: 0,
        shutdown_grace_ms: 20_000,
    };
}

impl ClientLimits {
    /// Places among the requests using local resources: the setting, or
    /// 16 per CPU the process may use (enough to keep the CPUs and the
    /// database busy; few enough that those admitted finish in tens of
    /// milliseconds: docs/benchmarks.md, "Past capacity").
    pub fn local_work_places(&self) -> usize {
        match self.max_local_work {
            Some(places) => places as usize,
            None => 16 * std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which planner proposes what to do with each user turn. Without an
/// inference URL the built-in deterministic planner runs (no network).
#[derive(Debug, Clone, Default, Args)]
pub struct PlannerArgs {
    /// Base URL of an OpenAI-compatible chat-completions API (for example
    /// `http://127.0.0.1:9000/v1`). Set it to use a model instead of the
    /// built-in planner; WARDEN_INFERENCE_MODEL is then required.
    #[arg(long, env = "WARDEN_INFERENCE_URL")]
    pub inference_url: Option<String>,

    /// Model name sent with every inference call.
    #[arg(long, env = "WARDEN_INFERENCE_MODEL", requires = "inference_url")]
    pub inference_model: Option<String>,

    /// API key of the inference backend (sent as a bearer token; never logged).
    #[arg(long, env = "WARDEN_INFERENCE_API_KEY", hide_env_values = true)]
    pub inference_api_key: Option<String>,

    /// Deadline of one inference call, in milliseconds.
    #[arg(long, env = "WARDEN_INFERENCE_TIMEOUT_MS", default_value_t = 20_000)]
    pub inference_timeout_ms: u64,
}

/// The policy sandbox: which guest judges capability definitions, arguments
/// and endpoint results, and the development switch for loopback endpoints.
#[derive(Debug, Clone, Default, Args)]
pub struct SandboxArgs {
    /// A policy guest component (.wasm) built against wit/ to use instead of
    /// the embedded default. It is checked against the world at start-up.
    #[arg(long, env = "WARDEN_POLICY_GUEST")]
    pub policy_guest: Option<PathBuf>,

    /// Directory where compiled guests are cached so restarts skip the
    /// compilation (seconds). It holds native code the server will run: a
    /// directory not owned by the service account, or writable by group or
    /// others, is ignored with a warning; entries are verified before use.
    /// Created 0700 if missing. Unset: compile at start.
    #[arg(long, env = "WARDEN_GUEST_CACHE_DIR")]
    pub guest_cache_dir: Option<PathBuf>,

    /// Virtual address space reserved for each guest memory, in MiB
    /// (64–4096). Unset: 4096 with guard pages, so guest code runs without
    /// bounds checks, and the sandbox reserves about 1 TiB of address space
    /// (not memory). Set it lower where the address space is bounded
    /// (`ulimit -v`, some containers, valgrind): guests then check bounds
    /// in code, a little slower.
    #[arg(
        long,
        env = "WARDEN_GUEST_MEMORY_RESERVATION_MIB",
        value_parser = clap::value_parser!(u64).range(64..=4096)
    )]
    pub guest_memory_reservation_mib: Option<u64>,

    /// DEVELOPMENT ONLY: let capability URLs be http:// or https:// on loopback
    /// (localhost, 127.0.0.0/8, [::1]) so examples and tests run on one machine.
    /// Off by default; announced loudly in the log when on.
    #[arg(long, env = "WARDEN_DEV_ALLOW_LOOPBACK", value_parser = clap::builder::FalseyValueParser::new())]
    pub dev_allow_loopback: bool,
}

/// The master key encrypts endpoint credentials and signing keys at rest.
#[derive(Debug, Clone, Default, Args)]
pub struct MasterKeyArgs {
    /// Master key: base64 of exactly 32 bytes. Prefer the file form in production.
    #[arg(
        long,
        env = "WARDEN_MASTER_KEY",
        hide_env_values = true,
        conflicts_with = "master_key_file",
        global = true
    )]
    pub master_key: Option<String>,

    /// File holding the base64 master key. With neither option, SQLite deployments
    /// get a key file created beside the database (mode 0600); PostgreSQL refuses to start.
    #[arg(long, env = "WARDEN_MASTER_KEY_FILE", global = true)]
    pub master_key_file: Option<PathBuf>,

    /// During a master-key rotation: file holding the previous key, still used to
    /// open secrets sealed before the rotation (see `warden admin master-key rotate`).
    #[arg(long, env = "WARDEN_MASTER_KEY_PREVIOUS_FILE", global = true)]
    pub master_key_previous_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Manage accounts.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Manage the master key that seals stored secrets.
    #[command(subcommand, name = "master-key")]
    MasterKey(MasterKeyCommand),
    /// Try a policy guest component before deploying it.
    #[command(subcommand)]
    Guest(GuestCommand),
    /// Manage the keys that sign capability contexts.
    #[command(subcommand, name = "signing-key")]
    SigningKey(SigningKeyCommand),
    /// Connect messaging-platform numbers and watch their inbound queue.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Manage prompt integrations: browser-callable JSON forms (contract
    /// 2.13). Each command prints the integration's public bundle, which
    /// never holds the prompt, the output schema or a secret.
    #[command(subcommand, name = "prompt-integration")]
    PromptIntegration(PromptIntegrationCommand),
    /// Read the audit trail of MCP tool calls (`/v1/mcp`).
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Answer an end user's data request: erase or export what is stored
    /// about them (SECURITY.md, "Data lifecycle").
    #[command(subcommand)]
    Data(DataCommand),
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Delete everything stored about one end user of an account: their
    /// conversations with messages, interactions, pending operations and
    /// references, their capability-gap events and their platform queue
    /// rows. Safe while servers run; prints counts, never content; running
    /// it again reports zeros.
    Erase {
        #[command(flatten)]
        subject: DataSubject,
    },
    /// Print what is stored about one end user of an account: every
    /// conversation, oldest first, with its messages in order (role, time,
    /// text), its interactions and their status, and gap-report texts.
    Export {
        #[command(flatten)]
        subject: DataSubject,
    },
}

/// Whose data: an account and one of its end users.
#[derive(Debug, Clone, Args)]
pub struct DataSubject {
    #[arg(long)]
    pub account: String,
    /// The end user as conversations store them: the `user_id` the HTTP
    /// channel was sent, or a platform sender's pseudonym (`usr_…`).
    #[arg(
        long,
        required_unless_present = "platform_sender",
        conflicts_with = "platform_sender"
    )]
    pub user: Option<String>,
    /// A messaging-platform sender's id (their phone number as the webhook
    /// delivers it), turned into the pseudonym the account stores.
    #[arg(long)]
    pub platform_sender: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// An account's latest MCP tool calls, newest first: time, API key id,
    /// capability and revision, outcome, duration, attempts (never arguments
    /// or results).
    Calls {
        #[arg(long)]
        account: String,
        /// How many calls to show (1 to 1000).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=1000))]
        limit: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum PromptIntegrationCommand {
    /// Register a manifest (JSON: version 1, name, origin, data_classification
    /// "non_sensitive", prompt, input_schema, output_schema); the schemas are
    /// checked by the policy guest against the supported subset.
    Create {
        #[arg(long)]
        account: String,
        /// The manifest file (at most 256 KiB).
        #[arg(long)]
        manifest: PathBuf,
        #[command(flatten)]
        bundle: BundleArgs,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// The account's integrations, as bundles.
    List {
        #[arg(long)]
        account: String,
        #[command(flatten)]
        bundle: BundleArgs,
    },
    /// One integration's bundle, with its current status.
    Show {
        id: String,
        #[command(flatten)]
        bundle: BundleArgs,
    },
    /// Stop serving it: its execute route answers 404 INTEGRATION_DISABLED.
    Disable {
        id: String,
        #[command(flatten)]
        bundle: BundleArgs,
    },
    /// Serve it again.
    Enable {
        id: String,
        #[command(flatten)]
        bundle: BundleArgs,
    },
    /// Replace the manifest: same id and challenge action, revision + 1.
    Update {
        id: String,
        #[arg(long)]
        manifest: PathBuf,
        #[command(flatten)]
        bundle: BundleArgs,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Route a platform number's webhook events to an account. The access
    /// token for replies is read from a file (one trailing newline trimmed)
    /// and sealed under the master key; without it the server's
    /// WARDEN_PLATFORM_ACCESS_TOKEN is used. Registering again replaces the token.
    Register {
        #[arg(long)]
        account: String,
        /// The platform's `phone_number_id` (1 to 32 digits).
        #[arg(long)]
        phone_number_id: String,
        #[arg(long)]
        access_token_file: Option<PathBuf>,
    },
    /// List an account's registered numbers (never their tokens).
    List {
        #[arg(long)]
        account: String,
    },
    /// Stop routing a number: its webhook events answer 404 from then on.
    Unregister {
        #[arg(long)]
        phone_number_id: String,
    },
    /// Counts of inbound messages per state (all accounts, or one).
    Queue {
        #[arg(long)]
        account: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SigningKeyCommand {
    /// Create a new signing key. It is published in the JWK set at once and
    /// signs from `--activate-in-secs` on (default: immediately); the key it
    /// replaces stays published for `--grace-secs` (default 7 days) so hosts
    /// can still verify what it signed. Running servers switch on their next call.
    Rotate {
        #[arg(long, default_value_t = 0)]
        activate_in_secs: u64,
        #[arg(long, default_value_t = 7 * 24 * 3600)]
        grace_secs: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum GuestCommand {
    /// Load a component, report whether it satisfies the `warden:policy` world
    /// and run the built-in self-test suite against it. Prints the report;
    /// exits non-zero when the guest would be refused or fails a required case.
    /// Needs no database.
    Check { path: PathBuf },
}

#[derive(Debug, Subcommand)]
pub enum MasterKeyCommand {
    /// Re-seal every stored secret under the current master key, in one
    /// transaction. Rotation: configure the new key as WARDEN_MASTER_KEY(_FILE)
    /// and the old one as WARDEN_MASTER_KEY_PREVIOUS_FILE, restart the servers,
    /// run this, then drop the previous key. Prints the counts.
    Rotate,
}

#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Create an account: prints {"account":NAME}. Fails if it exists.
    Create {
        /// 1 to 64 characters: letters, digits, '.', '_' or '-'.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Issue an API key for an account in this environment. The key is printed
    /// once and stored only as a hash: keep it.
    Issue { account: String },
    /// Revoke an API key by its key id: it is refused from then on.
    Revoke { key_id: String },
}
