//! Finished spans on their way to the collector: a bounded queue the
//! request's thread pushes onto, and one thread of its own that takes a
//! batch off it when the batch is full or the schedule comes round, and
//! sends it (`OtlpExporter`, a blocking client, never on the server's
//! runtime). A span that finds the queue full, and every span of a batch the
//! collector refused or did not take in time, is dropped and counted in
//! `warden_trace_spans_dropped_total`.
//!
//! Why not the SDK's `BatchSpanProcessor`: it hands each span through two
//! channels and moves it four times before the exporter sees it, with a gate
//! of ours in front to count what it drops. Here a span is pushed once
//! under a lock and the batch is taken whole: about 1,500 instructions a
//! turn fewer, counted under callgrind (docs/benchmarks.md, "What watching
//! costs"), and the drops are counted where they happen. Its settings
//! are the standard `OTEL_BSP_*` variables.

use super::otlp::{BatchSettings, OtlpExporter};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct BatchProcessor {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the exporting thread (a full batch, a flush, shutdown), and
    /// whoever waits for a flush to finish.
    wake: Condvar,
    settings: BatchSettings,
    exporter: Mutex<OtlpExporter>,
}

#[derive(Debug, Default)]
struct Queue {
    spans: Vec<SpanData>,
    /// Flushes asked for and flushes done: a flush waits until the second
    /// reaches its own number.
    flushes_asked: u64,
    flushes_done: u64,
    shutting_down: bool,
}

impl BatchProcessor {
    pub(super) fn start(exporter: OtlpExporter, settings: BatchSettings) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                spans: Vec::with_capacity(settings.max_batch),
                ..Queue::default()
            }),
            wake: Condvar::new(),
            settings,
            exporter: Mutex::new(exporter),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("warden-trace-export".into())
            .spawn(move || worker.run())?;
        Ok(BatchProcessor {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The exporting thread: a batch at a time until shutdown, then what
    /// is left.
    fn run(&self) {
        let mut next_export = Instant::now() + self.settings.schedule_delay;
        loop {
            let mut queue = self.queue();
            while !(queue.shutting_down
                || queue.flushes_asked > queue.flushes_done
                || queue.spans.len() >= self.settings.max_batch)
            {
                let now = Instant::now();
                if now >= next_export {
                    break;
                }
                queue = self
                    .wake
                    .wait_timeout(queue, next_export - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            let flush = queue.flushes_asked;
            let done = queue.shutting_down;
            // A flush or shutdown sends everything queued; otherwise one batch.
            let everything = done || flush > queue.flushes_done;
            let mut batches = Vec::new();
            while !queue.spans.is_empty() {
                let batch = if queue.spans.len() <= self.settings.max_batch {
                    // The whole queue at once: no span is moved again.
                    let fresh = Vec::with_capacity(self.settings.max_batch);
                    std::mem::replace(&mut queue.spans, fresh)
                } else {
                    queue.spans.drain(..self.settings.max_batch).collect()
                };
                batches.push(batch);
                if !everything {
                    break;
                }
            }
            drop(queue);
            for batch in batches {
                self.export(batch);
            }
            next_export = Instant::now() + self.settings.schedule_delay;
            let mut queue = self.queue();
            queue.flushes_done = queue.flushes_done.max(flush);
            drop(queue);
            self.wake.notify_all();
            if done {
                return;
            }
        }
    }

    fn export(&self, batch: Vec<SpanData>) {
        let count = batch.len() as u64;
        let exporter = self.exporter.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(err) = exporter.send(&batch) {
            tracing::debug!(error = %err, spans = count, "trace export failed");
            crate::metrics::trace_spans_dropped(count);
        }
    }

    /// Asks the thread to send everything queued and waits for it, at most
    /// `timeout`.
    fn flush(&self, timeout: Duration) -> OTelSdkResult {
        let deadline = Instant::now() + timeout;
        let mut queue = self.queue();
        queue.flushes_asked += 1;
        let mine = queue.flushes_asked;
        self.wake.notify_all();
        while queue.flushes_done < mine {
            let now = Instant::now();
            if now >= deadline {
                return Err(OTelSdkError::Timeout(timeout));
            }
            queue = self
                .wake
                .wait_timeout(queue, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Ok(())
    }
}

impl SpanProcessor for BatchProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        let mut queue = self.shared.queue();
        if queue.shutting_down || queue.spans.len() >= self.shared.settings.max_queue {
            drop(queue);
            crate::metrics::trace_spans_dropped(1);
            return;
        }
        queue.spans.push(span);
        let full = queue.spans.len() == self.shared.settings.max_batch;
        drop(queue);
        if full {
            self.shared.wake.notify_all();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.shared.flush(self.shared.settings.export_timeout)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let flushed = self.shared.flush(timeout);
        self.shared.queue().shutting_down = true;
        self.shared.wake.notify_all();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        // Once flushed, the thread only has to notice; a collector that
        // hangs is bounded by the client's timeout.
        if let Some(thread) = thread.filter(|_| flushed.is_ok()) {
            let _ = thread.join();
        }
        flushed
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.shared
            .exporter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_resource(resource);
    }
}
