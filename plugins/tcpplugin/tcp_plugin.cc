// async+tcpplugin: Siphon's TCP stack packaged as a stack plugin. It exists
// to prove the plugin path (loading, ABI checks, a messenger on a stack from
// a shared library) with a stack whose behaviour is known; its type() is
// "async+tcpplugin" so a test can tell it from the built-in async+posix.
#include <cstdio>
#include <exception>
#include <memory>

#include "msgr/transport/stack_plugin.h"
#include "msgr/transport/tcp_stack.h"

namespace {

using namespace siphon;

class TcpPluginStack final : public transport::Stack {
 public:
  explicit TcpPluginStack(const transport::TcpOptions& o) : inner_(o) {}
  std::string_view type() const noexcept override { return "async+tcpplugin"; }
  std::size_t worker_count() const noexcept override { return inner_.worker_count(); }
  transport::Worker& worker(std::size_t i) noexcept override { return inner_.worker(i); }
  transport::Worker& pick_worker() noexcept override { return inner_.pick_worker(); }
  transport::SendQueueMarks send_queue_marks() const noexcept override { return inner_.send_queue_marks(); }
  void start() override { inner_.start(); }
  void stop() override { inner_.stop(); }
  std::error_code listen(const NetAddress& addr, transport::AcceptHandler on_accept, NetAddress& bound) override {
    return inner_.listen(addr, std::move(on_accept), bound);
  }
  void connect(const NetAddress& peer, transport::Worker& w, transport::ConnectHandler done) override {
    inner_.connect(peer, w, std::move(done));
  }

 private:
  transport::TcpStack inner_;
};

transport::Stack* create(const siphon_stack_plugin_args* args, char* err, std::size_t err_len) {
  try {
    if (args == nullptr || args->options == nullptr) {
      std::snprintf(err, err_len, "no options given");
      return nullptr;
    }
    return new TcpPluginStack(*args->options);
  } catch (const std::exception& e) {
    std::snprintf(err, err_len, "%s", e.what());
    return nullptr;
  }
}

void destroy(transport::Stack* s) { delete s; }

const siphon_stack_plugin kPlugin{SIPHON_STACK_PLUGIN_ABI_VERSION,
                                  sizeof(transport::TcpOptions),
                                  "tcpplugin",
                                  "Siphon's TCP stack (msgr2 over Boost.Asio) built as a plugin",
                                  &create,
                                  &destroy};

}  // namespace

SIPHON_STACK_PLUGIN_EXPORT const siphon_stack_plugin* siphon_stack_plugin_entry(void) { return &kPlugin; }
