// defines: main — load a checkpoint written by zt-train (any world size: each rank's shards are
//          consolidated on load) and sample from it with train/sampling.h's generate().
//
//   ./generate CKPT_DIR ["prompt"] [tokens] [temperature] [top_k]
//
// With the same arguments it prints what `zt-generate --ckpt CKPT_DIR --prompt ... -n ...
// --temperature ... --top-k ... --seed 1337` prints (tests/test_install.sh checks it).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <zt/core/rng.h>
#include <zt/formats/tokenizer.h>
#include <zt/train/sampling.h>
#include <zt/train/trainer.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CKPT_DIR [prompt] [tokens] [temperature] [top_k]\n", argv[0]);
    return 2;
  }
  try {
    const std::string prompt = argc > 2 ? argv[2] : "\n";
    const int64_t tokens = argc > 3 ? std::stoll(argv[3]) : 200;
    const double temperature = argc > 4 ? std::stod(argv[4]) : 1.0;  // 0: greedy
    const int64_t top_k = argc > 5 ? std::stoll(argv[5]) : 0;        // 0: every token
    // The model named in the checkpoint's meta.json, filled with its consolidated parameters.
    std::unique_ptr<zt::Model> model = zt::load_trained_model(argv[1]);
    zt::ByteTokenizer tok;  // models trained on text files see bytes: 256 tokens
    if (model->vocab_size() != tok.vocab_size())
      throw std::runtime_error("the model's vocabulary has " + std::to_string(model->vocab_size()) +
                               " tokens, not the byte tokenizer's 256");
    zt::Rng rng(1337);
    // A prefill over the prompt, then one token per step through the model's KV cache.
    const std::vector<int32_t> out = zt::generate(*model, tok.encode(prompt), tokens, temperature, top_k, rng);
    std::cout << tok.decode(out) << std::endl;
  } catch (const std::exception& e) {  // zt::Error: a bad checkpoint, named with what was expected
    std::fprintf(stderr, "generate: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
