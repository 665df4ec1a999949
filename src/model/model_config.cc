#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "base/file_util.h"

namespace folio {
namespace {

using nlohmann::json;

// Reads an integer field; `required` fields that are missing are an error.
Status read_int(const json& j, const char* key, int& out, const std::string& src, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return invalid_argument(src + ": missing required field \"" + key + "\"");
    return Status();
  }
  if (!it->is_number_integer())
    return invalid_argument(src + ": field \"" + key + "\" must be an integer");
  int64_t v = it->get<int64_t>();
  if (v <= 0 || v > (int64_t{1} << 31) - 1)
    return invalid_argument(src + ": field \"" + key + "\" out of range: " + std::to_string(v));
  out = static_cast<int>(v);
  return Status();
}

Status read_double(const json& j, const char* key, double& out, const std::string& src) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  if (!it->is_number()) return invalid_argument(src + ": field \"" + key + "\" must be a number");
  out = it->get<double>();
  return Status();
}

std::vector<int32_t> read_id_list(const json& v) {
  std::vector<int32_t> ids;
  if (v.is_number_integer()) ids.push_back(v.get<int32_t>());
  if (v.is_array())
    for (const auto& e : v)
      if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
  return ids;
}

Status parse_architecture(const json& j, const std::string& src, ModelConfig& c) {
  auto it = j.find("architectures");
  if (it == j.end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
    return invalid_argument(src + ": missing \"architectures\" list");
  c.architecture_name = (*it)[0].get<std::string>();
  const std::string& a = c.architecture_name;
  if (a == "LlamaForCausalLM")
    c.architecture = Architecture::kLlama;
  else if (a == "MistralForCausalLM")
    c.architecture = Architecture::kMistral;
  else if (a == "Qwen2ForCausalLM")
    c.architecture = Architecture::kQwen2;
  else if (a == "Qwen3ForCausalLM")
    c.architecture = Architecture::kQwen3;
  else
    return unimplemented(src + ": unsupported architecture \"" + a +
                         "\" (supported: LlamaForCausalLM, MistralForCausalLM, "
                         "Qwen2ForCausalLM, Qwen3ForCausalLM)");
  return Status();
}

// transformers' get_mscale: yarn's attention factor for a scale and an mscale weight.
double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// yarn's keys, as transformers' _compute_yarn_parameters reads them (null or 0 for beta_fast,
// beta_slow and original_max_position_embeddings means the default).
Status parse_yarn(const json& p, const std::string& src, int max_position_embeddings,
                  RopeConfig& rope) {
  rope.factor = 0;
  FOLIO_RETURN_IF_ERROR(read_double(p, "factor", rope.factor, src));
  if (!(rope.factor > 0))
    return invalid_argument(src + ": yarn rope scaling needs a positive factor");
  rope.original_max_position_embeddings = max_position_embeddings;
  if (auto it = p.find("original_max_position_embeddings");
      it != p.end() && !(it->is_number_integer() && it->get<int64_t>() == 0))
    FOLIO_RETURN_IF_ERROR(read_int(p, "original_max_position_embeddings",
                                   rope.original_max_position_embeddings, src, false));
  for (auto [key, out, fallback] : {std::tuple{"beta_fast", &rope.beta_fast, 32.0},
                                    std::tuple{"beta_slow", &rope.beta_slow, 1.0}}) {
    *out = 0;
    FOLIO_RETURN_IF_ERROR(read_double(p, key, *out, src));
    if (*out == 0) *out = fallback;
  }
  if (!(rope.beta_fast > rope.beta_slow && rope.beta_slow > 0))
    return invalid_argument(src + ": yarn needs beta_fast > beta_slow > 0");
  if (auto it = p.find("truncate"); it != p.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid_argument(src + ": field \"truncate\" must be a boolean");
    rope.truncate = it->get<bool>();
  }
  double given = std::nan(""), mscale = 0, mscale_all_dim = 0;  // NaN: attention_factor unset
  FOLIO_RETURN_IF_ERROR(read_double(p, "attention_factor", given, src));
  FOLIO_RETURN_IF_ERROR(read_double(p, "mscale", mscale, src));
  FOLIO_RETURN_IF_ERROR(read_double(p, "mscale_all_dim", mscale_all_dim, src));
  if (!std::isnan(given))
    rope.attention_factor = given;
  else if (mscale != 0 && mscale_all_dim != 0)
    rope.attention_factor =
        yarn_mscale(rope.factor, mscale) / yarn_mscale(rope.factor, mscale_all_dim);
  else
    rope.attention_factor = yarn_mscale(rope.factor, 1.0);
  if (!(rope.attention_factor > 0))
    return invalid_argument(src + ": yarn's attention_factor must be positive");
  return Status();
}

// Rope settings live in `rope_parameters` (new) or `rope_theta` + `rope_scaling` (legacy).
Status parse_rope(const json& j, const std::string& src, int max_position_embeddings,
                  RopeConfig& rope) {
  FOLIO_RETURN_IF_ERROR(read_double(j, "rope_theta", rope.theta, src));
  const json* params = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object())
    params = &*it;
  else if (auto it2 = j.find("rope_scaling"); it2 != j.end() && it2->is_object())
    params = &*it2;
  if (!params) return Status();
  const json& p = *params;
  FOLIO_RETURN_IF_ERROR(read_double(p, "rope_theta", rope.theta, src));
  std::string type = "default";
  if (auto t = p.find("rope_type"); t != p.end() && t->is_string())
    type = t->get<std::string>();
  else if (auto t2 = p.find("type"); t2 != p.end() && t2->is_string())
    type = t2->get<std::string>();
  if (type != "default" && type != "llama3" && type != "linear" && type != "yarn")
    return unimplemented(src + ": unsupported rope type \"" + type +
                         "\" (default, linear, llama3, yarn)");
  rope.type = type;
  if (type == "linear") {  // position interpolation: every frequency divided by `factor`
    rope.factor = 0;
    FOLIO_RETURN_IF_ERROR(read_double(p, "factor", rope.factor, src));
    if (!(rope.factor > 0))
      return invalid_argument(src + ": linear rope scaling needs a positive factor");
  }
  if (type == "yarn") FOLIO_RETURN_IF_ERROR(parse_yarn(p, src, max_position_embeddings, rope));
  if (type == "llama3") {
    FOLIO_RETURN_IF_ERROR(read_double(p, "factor", rope.factor, src));
    FOLIO_RETURN_IF_ERROR(read_double(p, "low_freq_factor", rope.low_freq_factor, src));
    FOLIO_RETURN_IF_ERROR(read_double(p, "high_freq_factor", rope.high_freq_factor, src));
    FOLIO_RETURN_IF_ERROR(read_int(p, "original_max_position_embeddings",
                                   rope.original_max_position_embeddings, src, true));
    if (rope.factor <= 0 || rope.high_freq_factor <= rope.low_freq_factor)
      return invalid_argument(src + ": invalid llama3 rope scaling parameters");
  }
  if (!(rope.theta > 0)) return invalid_argument(src + ": rope_theta must be positive");
  return Status();
}

// ModelConfig::sliding_window, as transformers' configs derive it (MistralConfig, Qwen2Config,
// Qwen3Config): the window is set only where some layer's attention slides.
Status parse_sliding_window(const json& j, const std::string& src, ModelConfig& c) {
  if (c.architecture == Architecture::kLlama) return Status();
  int window = 4096;  // the configs' default when the key is absent; null: no window
  if (auto it = j.find("sliding_window"); it != j.end() && it->is_null()) return Status();
  FOLIO_RETURN_IF_ERROR(read_int(j, "sliding_window", window, src, false));
  if (c.architecture == Architecture::kMistral) {
    c.sliding_window = window;
    return Status();
  }
  // Qwen2 / Qwen3: the window only with use_sliding_window, on the layers layer_types names
  // "sliding_attention" or, without that list, the layers from max_window_layers (default 28) on.
  auto use = j.find("use_sliding_window");
  if (use == j.end() || !use->is_boolean() || !use->get<bool>()) return Status();
  std::vector<bool> layers(c.num_layers, false);
  if (auto types = j.find("layer_types"); types != j.end() && types->is_array()) {
    if (types->size() != static_cast<size_t>(c.num_layers))
      return invalid_argument(src + ": layer_types has " + std::to_string(types->size()) +
                              " entries for " + std::to_string(c.num_layers) + " layers");
    for (size_t l = 0; l < types->size(); ++l)
      layers[l] = (*types)[l].is_string() && (*types)[l].get<std::string>() == "sliding_attention";
  } else {
    int64_t max_window_layers = 28;
    if (auto m = j.find("max_window_layers"); m != j.end() && !m->is_null()) {
      if (!m->is_number_integer() || m->get<int64_t>() < 0)
        return invalid_argument(src +
                                ": field \"max_window_layers\" must be a non-negative integer");
      max_window_layers = m->get<int64_t>();
    }
    for (int l = 0; l < c.num_layers; ++l) layers[l] = l >= max_window_layers;
  }
  const bool slides = std::find(layers.begin(), layers.end(), true) != layers.end();
  if (slides && std::find(layers.begin(), layers.end(), false) != layers.end())
    c.sliding_layers = std::move(layers);
  if (slides) c.sliding_window = window;
  return Status();
}

}  // namespace

Result<ModelConfig> ModelConfig::from_json(const json& j, const std::string& src) {
  if (!j.is_object()) return invalid_argument(src + ": expected a JSON object");
  ModelConfig c;
  FOLIO_RETURN_IF_ERROR(parse_architecture(j, src, c));
  // A quantized checkpoint (AWQ, GPTQ, fp8, compressed-tensors...) would otherwise fail later on
  // a missing or unread tensor, which does not say why.
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null()) {
    std::string method = "?";
    if (q->is_object())
      if (auto m = q->find("quant_method"); m != q->end() && m->is_string()) method = *m;
    const std::string what = "quantization_config, quant_method \"" + method + "\"";
    return unimplemented(src + ": quantized checkpoints are not supported (" + what +
                         "): folio loads F32, F16 and BF16 weights");
  }
  FOLIO_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, src, true));
  FOLIO_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, src, true));
  FOLIO_RETURN_IF_ERROR(read_int(j, "intermediate_size", c.intermediate_size, src, true));
  FOLIO_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.num_layers, src, true));
  FOLIO_RETURN_IF_ERROR(read_int(j, "num_attention_heads", c.num_heads, src, true));
  c.num_kv_heads = c.num_heads;
  FOLIO_RETURN_IF_ERROR(read_int(j, "num_key_value_heads", c.num_kv_heads, src, false));
  if (c.hidden_size % c.num_heads != 0 && !j.contains("head_dim"))
    return invalid_argument(src + ": hidden_size is not a multiple of num_attention_heads");
  c.head_dim = c.hidden_size / c.num_heads;
  FOLIO_RETURN_IF_ERROR(read_int(j, "head_dim", c.head_dim, src, false));
  if (c.num_heads % c.num_kv_heads != 0)
    return invalid_argument(src + ": num_attention_heads (" + std::to_string(c.num_heads) +
                            ") is not a multiple of num_key_value_heads (" +
                            std::to_string(c.num_kv_heads) + ")");
  if (c.head_dim % 2 != 0) return invalid_argument(src + ": head_dim must be even for rope");
  c.max_position_embeddings = 4096;
  FOLIO_RETURN_IF_ERROR(
      read_int(j, "max_position_embeddings", c.max_position_embeddings, src, false));
  FOLIO_RETURN_IF_ERROR(read_double(j, "rms_norm_eps", c.rms_norm_eps, src));
  if (auto it = j.find("tie_word_embeddings"); it != j.end() && it->is_boolean())
    c.tie_word_embeddings = it->get<bool>();
  if (auto it = j.find("hidden_act"); it != j.end() && it->is_string() && *it != "silu")
    return unimplemented(src + ": unsupported hidden_act \"" + it->get<std::string>() + "\"");
  // Qwen2 always has q/k/v biases. Llama's and Qwen3's attention_bias puts biases on q, k, v
  // and o_proj, and Llama's mlp_bias on the MLP's three products: folio has no place for those
  // (Mistral's modelling code reads neither key).
  c.qkv_bias = c.architecture == Architecture::kQwen2;
  const bool llama = c.architecture == Architecture::kLlama;
  const struct {
    const char* key;
    bool read;  // by this architecture's modelling code
    const char* biases;
  } bias_keys[] = {
      {"attention_bias", llama || c.architecture == Architecture::kQwen3, "q/k/v and o_proj"},
      {"mlp_bias", llama, "gate/up/down"}};
  for (const auto& b : bias_keys)
    if (auto it = j.find(b.key); b.read && it != j.end() && it->is_boolean() && it->get<bool>())
      return unimplemented(src + ": " + b.key + ": true (biases on " + b.biases +
                           ") is not supported");
  c.qk_norm = c.architecture == Architecture::kQwen3;
  for (const char* key : {"dtype", "torch_dtype"})
    if (auto it = j.find(key); it != j.end() && it->is_string()) {
      c.dtype = it->get<std::string>();
      break;
    }
  if (auto it = j.find("bos_token_id"); it != j.end() && it->is_number_integer())
    c.bos_token_id = it->get<int32_t>();
  if (auto it = j.find("eos_token_id"); it != j.end())
    c.generation.eos_token_ids = read_id_list(*it);
  FOLIO_RETURN_IF_ERROR(parse_rope(j, src, c.max_position_embeddings, c.rope));
  FOLIO_RETURN_IF_ERROR(parse_sliding_window(j, src, c));
  c.rope.inv_freq_precision = c.dtype == "bfloat16" ? "bfloat16" : "float32";
  return c;
}

int ModelConfig::rope_scaled_max_len() const {
  double len = max_position_embeddings;
  if (rope.type == "linear") len *= rope.factor;
  if (rope.type == "yarn") len = rope.original_max_position_embeddings * rope.factor;
  return len >= double{1 << 30} ? 1 << 30 : std::max(1, static_cast<int>(len));
}

int ModelConfig::layer_window(int layer) const {
  if (!sliding_window) return 0;
  if (!sliding_layers.empty() && !sliding_layers[layer]) return 0;
  return *sliding_window;
}

int ModelConfig::kv_window() const {
  if (!sliding_window) return 0;
  for (bool slides : sliding_layers)
    if (!slides) return 0;
  return *sliding_window;
}

double ModelConfig::softmax_scale() const {
  return rope.attention_factor * rope.attention_factor / std::sqrt(static_cast<double>(head_dim));
}

Status apply_hf_overrides(json& config, const json& overrides) {
  if (!overrides.is_object())
    return invalid_argument("--hf-overrides must be a JSON object, got " + overrides.dump());
  if (!config.is_object()) return invalid_argument("config.json is not a JSON object");
  for (const auto& [key, value] : overrides.items()) config[key] = value;
  return Status();
}

Result<ModelConfig> ModelConfig::load(const std::string& model_dir, const json& overrides) {
  std::string path = join_path(model_dir, "config.json");
  FOLIO_ASSIGN_OR_RETURN(json j, read_json_file(path));
  FOLIO_RETURN_IF_ERROR(apply_hf_overrides(j, overrides));
  FOLIO_ASSIGN_OR_RETURN(ModelConfig c, from_json(j, path));
  std::string gen_path = join_path(model_dir, "generation_config.json");
  if (!file_exists(gen_path)) return c;
  FOLIO_ASSIGN_OR_RETURN(json g, read_json_file(gen_path));
  if (!g.is_object()) return invalid_argument(gen_path + ": expected a JSON object");
  if (auto it = g.find("eos_token_id"); it != g.end() && !it->is_null())
    c.generation.eos_token_ids = read_id_list(*it);
  auto opt_float = [&](const char* key, std::optional<float>& out) {
    if (auto it = g.find(key); it != g.end() && it->is_number()) out = it->get<float>();
  };
  opt_float("temperature", c.generation.temperature);
  opt_float("top_p", c.generation.top_p);
  opt_float("min_p", c.generation.min_p);
  opt_float("repetition_penalty", c.generation.repetition_penalty);
  if (auto it = g.find("top_k"); it != g.end() && it->is_number_integer())
    c.generation.top_k = it->get<int>();
  return c;
}

}  // namespace folio
