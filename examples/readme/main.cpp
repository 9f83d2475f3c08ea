// Train GPT-2 with ZeRO stage 3 from C++:  mpirun -np 2 ./readme data/corpus/train.txt
#include <cstdio>
#include <zt/train/trainer.h>

int main(int argc, char** argv) {
  zt::ProcessGroup& group = zt::init_process_group();  // MPI under mpirun; one process without
  {
    zt::RunConfig run;
    run.model = "gpt2-nano";                // a bundled config, or run.init_from = "<HF dir>"
    run.train_data = argc > 1 ? argv[1] : "data/corpus/train.txt";  // text: byte tokens
    run.seq_len = 64, run.steps = 20;
    zt::EngineConfig& ds = run.engine;  // the DeepSpeed config's keys, DeepSpeed's defaults
    ds.train_micro_batch_size_per_gpu = 4;
    ds.optimizer.lr = 3e-3;
    ds.zero.stage = 3;                      // parameters, gradients, optimizer state: 1/N each
    zt::Trainer trainer(run, group);        // builds the model, the engine and the data loader
    while (!trainer.done()) {
      const zt::StepStats s = trainer.step();
      if (group.rank() == 0) std::printf("step %2lld  loss %.6f\n", static_cast<long long>(s.step), s.loss);
    }
  }
  zt::finalize_process_group();
}
