//! Black-box tests: a real server on a real listener over a real database,
//! each test run on SQLite and on PostgreSQL (see `helpers::backends`).
//! One binary, so everything links once.

mod helpers;

mod abort;
mod admin_cli;
mod auth;
mod capabilities;
mod capability_rules;
mod channel;
mod conversation_rules;
mod conversation_rules_model;
mod crash;
mod crash_harness;
mod credentials;
mod data_lifecycle;
mod diagnostics;
mod dialogues;
mod errors;
mod executor;
mod gaps;
mod greedy_clients;
mod guest_swap;
mod health;
mod host_endpoint;
mod isolation;
mod mcp;
mod metrics;
mod nul_text;
mod openapi;
mod operation_results;
mod overload;
mod planner_openai;
mod platform_durability;
mod platform_webhook;
mod policy;
mod prompt_integrations;
mod pruning;
mod query_plans;
mod secret_sweep;
mod signing;
mod slow_clients;
mod ssrf;
mod status_mappings;
mod storage;
mod store_boundary;
mod tenant_patterns;
mod tidy;
mod traces;
