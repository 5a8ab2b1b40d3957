#include "chat_prompt.h"

#include <vector>

#include "ree/models/chat_template.h"

namespace ree::launcher {

Status renderChatPrompt(const std::string& model, const std::string* system,
                        const std::string& user, std::string* prompt) {
  models::ModelChatTemplate loaded;
  if (models::loadModelChatTemplate(model, &loaded) != Status::kSuccess) {
    return setError(Status::kInvalidArgument, nullptr, 0, "--chat: %s", lastErrorMessage());
  }
  std::vector<models::ChatMessage> messages;
  if (system != nullptr) messages.push_back({"system", *system});
  messages.push_back({"user", user});
  models::ChatRenderOptions options;
  options.add_generation_prompt = true;
  options.bos_token = loaded.bos_token;
  options.eos_token = loaded.eos_token;
  if (loaded.chat_template->render(messages, options, prompt) != Status::kSuccess) {
    return setError(Status::kInvalidArgument, nullptr, 0, "--chat: %s", lastErrorMessage());
  }
  return Status::kSuccess;
}

}  // namespace ree::launcher
