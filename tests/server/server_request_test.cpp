// The server's pieces: request parsing, stop strings, receipt ids, metrics, and the connection
// watch (over a loopback socket).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "api_error.h"
#include "completion_request.h"
#include "connection_watch.h"
#include "metrics.h"
#include "receipt_store.h"
#include "stop_strings.h"

namespace ree::server {
namespace {

RequestLimits limits() {
  RequestLimits l;
  l.model_name = "m";
  l.vocab_size = 258;
  return l;
}

bool parse(const std::string& body, CompletionRequest* out, ApiError* error) {
  return parseCompletionRequest(body, limits(), out, error);
}

TEST(CompletionRequest, ReadsEveryField) {
  CompletionRequest r;
  ApiError e;
  ASSERT_TRUE(parse(R"({"model": "m", "prompt": [1, 257], "max_tokens": 5, "temperature": 0.7,
                        "top_p": 0.5, "top_k": -1, "seed": 18446744073709551615, "stop": "x",
                        "stream": true, "stream_options": {"include_usage": true}, "n": 3,
                        "best_of": 3, "add_special_tokens": false, "user": "u"})",
                    &r, &e))
      << e.message;
  EXPECT_TRUE(r.prompt_is_ids);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 257}));
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.sampling.temperature, 0.7f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.seed, UINT64_MAX);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x"}));
  EXPECT_TRUE(r.stream && r.include_usage && !r.add_special_tokens);
  EXPECT_EQ(r.n, 3);
}

TEST(CompletionRequest, NeutralValuesOfUnsupportedFieldsPass) {
  CompletionRequest r;
  ApiError e;
  EXPECT_TRUE(parse(R"({"prompt": "a", "logprobs": false, "echo": false, "n": 1, "best_of": 1,
                        "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {},
                        "suffix": null})",
                    &r, &e))
      << e.message;
  EXPECT_FALSE(parse(R"({"prompt": "a", "logprobs": true})", &r, &e));
  EXPECT_EQ(e.param, "logprobs");
}

TEST(CompletionRequest, LogprobsIsACountFrom0To20) {
  CompletionRequest r;
  ApiError e;
  ASSERT_TRUE(parse(R"({"prompt": "a"})", &r, &e)) << e.message;
  EXPECT_EQ(r.top_logprobs, -1);
  ASSERT_TRUE(parse(R"({"prompt": "a", "logprobs": null})", &r, &e)) << e.message;
  EXPECT_EQ(r.top_logprobs, -1);
  ASSERT_TRUE(parse(R"({"prompt": "a", "logprobs": false})", &r, &e)) << e.message;
  EXPECT_EQ(r.top_logprobs, -1);
  ASSERT_TRUE(parse(R"({"prompt": "a", "logprobs": 0})", &r, &e)) << e.message;
  EXPECT_EQ(r.top_logprobs, 0);
  ASSERT_TRUE(parse(R"({"prompt": "a", "logprobs": 20})", &r, &e)) << e.message;
  EXPECT_EQ(r.top_logprobs, 20);
  for (const char* bad :
       {R"({"prompt": "a", "logprobs": 21})", R"({"prompt": "a", "logprobs": -1})",
        R"({"prompt": "a", "logprobs": 1.5})", R"({"prompt": "a", "logprobs": "2"})",
        R"({"prompt": "a", "logprobs": true})"}) {
    EXPECT_FALSE(parse(bad, &r, &e)) << bad;
    EXPECT_EQ(e.param, "logprobs") << bad;
    EXPECT_NE(e.message.find("[0, 20]"), std::string::npos) << e.message;
  }
}

TEST(CompletionRequest, DefaultsAreOpenAis) {
  CompletionRequest r;
  ApiError e;
  ASSERT_TRUE(parse(R"({"prompt": "hi"})", &r, &e)) << e.message;
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.seed, 0u);
  EXPECT_EQ(r.n, 1);
}

TEST(CompletionRequest, RefusalsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "a", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 18446744073709551615})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 2147483648})", "max_tokens"},
      {R"({"prompt": "a", "seed": -1})", "seed"},
      {R"({"prompt": "a", "temperature": 10001})", "temperature"},
      {R"({"prompt": "a", "top_p": 1e-50})", "top_p"},
      {R"({"prompt": "a", "top_k": -2})", "top_k"},
      {R"({"prompt": [258]})", "prompt"},
      {R"({"prompt": "a", "n": 129})", "n"},
      {R"({"prompt": "a", "n": 2, "best_of": 1})", "best_of"},
      {R"({"prompt": "a", "stop": ["a", 1]})", "stop"},
      {R"({"prompt": "a", "x": 1})", "x"},
  };
  for (const auto& [body, param] : cases) {
    CompletionRequest r;
    ApiError e;
    EXPECT_FALSE(parse(body, &r, &e)) << body;
    EXPECT_EQ(e.param, param) << body;
    EXPECT_EQ(e.http_status, 400) << body;
  }
  CompletionRequest r;
  ApiError e;
  EXPECT_FALSE(parse(R"({"prompt": "a", "model": "other"})", &r, &e));
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.code, "model_not_found");
}

TEST(ApiError, ClientMessageDropsTheSourceLocation) {
  EXPECT_EQ(clientMessage("bad thing (core/src/x.cpp:12) [io-error]"), "bad thing");
  EXPECT_EQ(clientMessage("kept (as it is)"), "kept (as it is)");
  EXPECT_EQ(errorBody(badRequest("", "m")),
            R"({"error":{"code":null,"message":"m","param":null,"type":"invalid_request_error"}})");
}

// Whatever pieces the text arrives in, the stream shows exactly the whole text's cut.
TEST(StopScanner, StreamedEqualsWhole) {
  std::mt19937 rng(26);
  const std::string alphabet = "abc";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    for (int i = rng() % 30; i > 0; --i)
      text += alphabet[rng() % alphabet.size()];
    std::vector<std::string> stops;
    for (int s = 1 + rng() % 3; s > 0; --s) {
      std::string stop;
      for (int i = 1 + rng() % 4; i > 0; --i)
        stop += alphabet[rng() % alphabet.size()];
      stops.push_back(stop);
    }
    bool whole_stopped = false;
    const std::string whole = applyStops(text, stops, &whole_stopped);
    StopScanner scanner(stops);
    std::string shown;
    for (size_t at = 0; at < text.size();) {
      size_t n = std::min<size_t>(text.size() - at, rng() % 4);
      shown += scanner.feed(text.substr(at, n));
      at += n;
    }
    shown += scanner.finish();
    ASSERT_EQ(shown, whole) << text;
    ASSERT_EQ(scanner.stopped(), whole_stopped) << text;
  }
  bool stopped = false;
  EXPECT_EQ(applyStops("xabcd", {"abcd", "bc"}, &stopped), "xa");  // "bc" is complete first
  EXPECT_TRUE(stopped);
}

TEST(ReceiptStore, IdsAreFreshAndChecked) {
  std::string a = newReceiptId();
  EXPECT_TRUE(isReceiptId(a));
  EXPECT_NE(a, newReceiptId());
  EXPECT_FALSE(isReceiptId("cmpl-../../etc/passwd"));
  EXPECT_FALSE(isReceiptId("cmpl-" + std::string(32, 'A')));
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.countResponse("completions", 200);
  m.countGeneration(3, 4, 0.2);
  const std::string text = m.render();
  EXPECT_NE(text.find("ree_http_responses_total{endpoint=\"completions\",code=\"200\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("ree_request_latency_seconds_bucket{le=\"0.1\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("ree_request_latency_seconds_bucket{le=\"0.25\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ree_generated_tokens_total 4\n"), std::string::npos);
}

TEST(Metrics, KvPoolGaugesWhenTheEngineHasAPool) {
  Metrics m;
  m.countDisconnect();
  EXPECT_EQ(m.render().find("ree_kv_cache"), std::string::npos);
  KvPoolGauges kv;
  kv.blocks = 10;
  kv.used = 3;
  kv.block_size = 16;
  const std::string text = m.render(kv);
  EXPECT_NE(text.find("ree_client_disconnects_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("ree_kv_cache_blocks 10\n"), std::string::npos);
  EXPECT_NE(text.find("ree_kv_cache_block_size 16\n"), std::string::npos);
  EXPECT_NE(text.find("ree_kv_cache_blocks_used 3\n"), std::string::npos);
  EXPECT_NE(text.find("ree_kv_cache_usage 0.300000\n"), std::string::npos);
}

// A loopback connection: the watch finds the server side's socket by its addresses and sees the
// client's close.
TEST(ConnectionWatch, SeesThePeerClose) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t size = sizeof(address);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  sockaddr_in peer{};
  size = sizeof(peer);
  int accepted = accept(listener, reinterpret_cast<sockaddr*>(&peer), &size);
  ASSERT_GE(accepted, 0);
  ConnectionWatch watch("127.0.0.1", ntohs(peer.sin_port), ntohs(address.sin_port));
  EXPECT_FALSE(watch.peerClosed());
  ASSERT_EQ(write(client, "x", 1), 1);  // data waiting is not a close
  EXPECT_FALSE(watch.peerClosed());
  close(client);
  EXPECT_TRUE(watch.peerClosed());
  ConnectionWatch nobody("127.0.0.1", 1, 1);
  EXPECT_FALSE(nobody.peerClosed());
  close(accepted);
  close(listener);
}

}  // namespace
}  // namespace ree::server
