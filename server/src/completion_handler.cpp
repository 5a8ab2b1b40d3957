// POST /v1/completions and /v1/chat/completions: parse, queue the job, then answer when it is done,
// or stream its tokens as SSE events while the engine produces them. A client that goes away (a
// failed write, or its connection seen closed while the handler waits) stops the job's
// generation at the engine's next step, which frees its KV cache blocks.
#include <httplib.h>

#include <chrono>
#include <ctime>

#include "completion_response.h"
#include "connection_watch.h"
#include "server_context.h"
#include "stop_strings.h"

namespace ree::server {
namespace {

const char* endpointOf(const CompletionHeader& header) {
  return header.chat ? "chat" : "completions";
}

// The client closed its connection: the job's generation stops (once, counted once).
void clientLeft(ServerContext& context, Job& job) {
  if (job.client_gone.exchange(true)) return;
  job.clientGone();
  context.metrics.countDisconnect();
}

bool writeEvent(httplib::DataSink& sink, const std::string& event) {
  return sink.write(event.data(), event.size());
}

// Waits until `ready()` holds (under job.mutex), looking every 100 ms whether the client closed
// its connection. False when it did: the job is stopped (its choices end after the token being
// produced) and counted.
template <typename Ready>
bool waitWatching(ServerContext& context, Job& job, ConnectionWatch& watch, Ready ready) {
  std::unique_lock<std::mutex> lock(job.mutex);
  while (!job.changed.wait_for(lock, std::chrono::milliseconds(100), ready)) {
    lock.unlock();
    const bool closed = watch.peerClosed();
    lock.lock();
    if (closed) {
      lock.unlock();
      clientLeft(context, job);
      return false;
    }
  }
  return true;
}

// Waits for the job's next tokens (or its end): false when the client left meanwhile. *done
// says whether the job ended.
bool nextTokens(ServerContext& context, Job& job, ConnectionWatch& watch,
                std::deque<TokenEvent>* events, bool* done) {
  if (!waitWatching(context, job, watch, [&] { return !job.tokens.empty() || job.done; })) {
    return false;
  }
  std::lock_guard<std::mutex> lock(job.mutex);
  events->swap(job.tokens);
  *done = job.done && job.tokens.empty();
  return true;
}

// What a stream has shown of one choice.
struct ChoiceStream {
  explicit ChoiceStream(const std::vector<std::string>& stops) : scanner(stops) {}
  StopScanner scanner;
  std::string streamed;     // the engine's text pieces so far
  size_t token_offset = 0;  // logprobs' text_offset of the next token
};

// The stream's tail after the last token: per choice the held-back text and finish_reason with the
// receipt; the usage event when asked; then [DONE].
bool finishStream(const CompletionHeader& header, const Job& job,
                  std::vector<ChoiceStream>& choices, httplib::DataSink& sink) {
  if (job.failed) {
    return writeEvent(sink, streamErrorEvent(job.error)) && writeEvent(sink, kStreamDone);
  }
  for (size_t c = 0; c < choices.size(); ++c) {
    const GenerationResult& result = job.results[c];
    ChoiceStream& choice = choices[c];
    // Text the engine completed only at the end (bytes of a character held back across tokens).
    std::string tail;
    if (result.text.compare(0, choice.streamed.size(), choice.streamed) == 0) {
      tail = choice.scanner.feed(result.text.substr(choice.streamed.size()));
    }
    tail += choice.scanner.finish();
    const int index = static_cast<int>(c);
    if (!tail.empty() && !writeEvent(sink, streamTextEvent(header, index, tail, {}))) return false;
    std::string reason = openAiFinishReason(result, choice.scanner.stopped());
    if (!writeEvent(sink, streamFinishEvent(header, job, index, reason))) return false;
  }
  if (job.request.include_usage && !writeEvent(sink, streamUsageEvent(header, job))) return false;
  return writeEvent(sink, kStreamDone);
}

// The whole stream, written from the HTTP thread that owns the connection. Returns false when the
// client went away: the job is stopped (the engine ends it after the token being produced, and
// writes its receipt when every choice has a token).
bool streamJob(ServerContext& context, const std::shared_ptr<Job>& job,
               const CompletionHeader& header, ConnectionWatch& watch, httplib::DataSink& sink) {
  std::vector<ChoiceStream> choices(static_cast<size_t>(job->request.n),
                                    ChoiceStream(job->request.stop));
  auto left = [&] {
    clientLeft(context, *job);
    context.metrics.countResponse(endpointOf(header), 499);
    return false;
  };
  for (int c = 0; header.chat && c < job->request.n; ++c) {
    if (!writeEvent(sink, streamRoleEvent(header, c))) return left();
  }
  bool done = false;
  while (!done) {
    std::deque<TokenEvent> events;
    if (!nextTokens(context, *job, watch, &events, &done)) {
      context.metrics.countResponse(endpointOf(header), 499);
      return false;
    }
    for (const TokenEvent& event : events) {
      ChoiceStream& choice = choices[static_cast<size_t>(event.choice)];
      choice.streamed += event.text;
      if (choice.scanner.stopped()) continue;
      std::string shown = choice.scanner.feed(event.text);
      const TokenLogprobs* logprobs = event.logprobs ? &*event.logprobs : nullptr;
      if (!writeEvent(sink, streamTextEvent(header, event.choice, shown, {event.token}, logprobs,
                                            &choice.token_offset))) {
        return left();
      }
    }
  }
  if (!finishStream(header, *job, choices, sink)) return left();
  context.metrics.countResponse(endpointOf(header), 200);
  sink.done();
  return true;
}

// Queues the job, or answers 503 (draining) or 429 (the queue is full) and returns false.
bool admit(ServerContext& context, const std::shared_ptr<Job>& job, const std::string& endpoint,
           httplib::Response& response) {
  Scheduler::Admission admission =
      context.draining ? Scheduler::Admission::kDraining : context.scheduler.submit(job);
  if (admission == Scheduler::Admission::kQueued) return true;
  ApiError error;
  error.type = "server_error";
  if (admission == Scheduler::Admission::kDraining) {
    error.http_status = 503;
    error.code = "shutting_down";
    error.message = "the server is shutting down and takes no new requests";
  } else {
    error.http_status = 429;
    error.code = "queue_full";
    error.message = "too many requests are waiting (--max-queue); retry later";
  }
  sendError(context, endpoint, error, response);
  return false;
}

void answerWhenDone(ServerContext& context, const std::shared_ptr<Job>& job,
                    const CompletionHeader& header, ConnectionWatch& watch,
                    httplib::Response& response) {
  if (!waitWatching(context, *job, watch, [&] { return job->done; })) {
    return sendError(context, endpointOf(header), clientClosedError(), response);
  }
  if (job->failed) return sendError(context, endpointOf(header), job->error, response);
  response.set_header("X-REE-Receipt-SHA256", job->receipt_sha256);
  response.set_content(completionBody(header, *job), "application/json");
  context.metrics.countResponse(endpointOf(header), 200);
}

}  // namespace

void handleCompletion(ServerContext& context, const httplib::Request& request,
                      httplib::Response& response, bool chat) {
  auto job = std::make_shared<Job>();
  ApiError error;
  const std::string endpoint = chat ? "chat" : "completions";
  bool parsed =
      chat ? parseChatRequest(request.body, context.limits, context.chat, &job->request, &error)
           : parseCompletionRequest(request.body, context.limits, &job->request, &error);
  if (!parsed) return sendError(context, endpoint, error, response);
  job->makeStops();
  job->id = newReceiptId();
  if (!admit(context, job, endpoint, response)) return;
  CompletionHeader header{job->id, context.limits.model_name,
                          static_cast<int64_t>(std::time(nullptr)), chat,
                          context.engine.tokenizer()};
  response.set_header("X-REE-Receipt-Id", job->id);
  auto watch = std::make_shared<ConnectionWatch>(request.remote_addr, request.remote_port,
                                                 request.local_port);
  if (!job->request.stream) return answerWhenDone(context, job, header, *watch, response);
  // The status line goes out with the first byte of the stream: wait until the job passed the
  // checks that need the model (prompt length), so that their refusal is still a 4xx.
  if (!waitWatching(context, *job, *watch, [&] { return job->started || job->done; })) {
    return sendError(context, endpoint, clientClosedError(), response);
  }
  if (job->failed) return sendError(context, endpoint, job->error, response);
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream", [&context, job, header, watch](size_t, httplib::DataSink& sink) {
        return streamJob(context, job, header, *watch, sink);
      });
}

}  // namespace ree::server
