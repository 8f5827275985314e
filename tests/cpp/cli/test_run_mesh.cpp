// `tessera run --mesh/--zero/--microbatches/--dry-run` (tessera/cli/run_mesh.cpp):
// the launcher refuses a bad mesh before starting anything, and a dry run
// prints the placement and the model-state memory without starting mpirun.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;

// A folder holding a fake `mpirun` that records that it was started; it is
// put first on PATH, so a test sees whether the launcher got as far as mpirun.
class RunMesh : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-run-mesh-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    marker_ = dir_ + "/mpirun-started";
    std::ofstream fake(dir_ + "/mpirun");
    fake << "#!/bin/sh\n{ echo \"$@\"; echo \"TESSERA_MESH=$TESSERA_MESH\"; echo "
            "\"TESSERA_ZERO=$TESSERA_ZERO\"; echo \"TESSERA_MICROBATCHES=$TESSERA_MICROBATCHES\"; "
            "} > '"
         << marker_ << "'\nexit 0\n";
    fake.close();
    chmod((dir_ + "/mpirun").c_str(), 0755);
    script_ = std::string(TESSERA_SOURCE_DIR) + "/examples/mesh_basics.py";
  }
  void TearDown() override { fs::remove_all(dir_); }

  using Result = tessera::test::CommandResult;  // stdout and stderr together

  // `tessera run ARGS` with the fake mpirun first on PATH and no TESSERA_MESH,
  // TESSERA_ZERO, TESSERA_MICROBATCHES or SLURM job from the test's environment.
  // `variables`: VAR=VALUE settings for the launcher's environment.
  Result run(const std::string& args, const std::string& variables = "") {
    std::string cmd =
        "env -u TESSERA_MESH -u TESSERA_ZERO -u TESSERA_MICROBATCHES -u SLURM_JOB_ID "
        "PATH='" +
        dir_ + "':\"$PATH\" " + variables + " " + TESSERA_CLI + " run " + args + " 2>&1";
    return tessera::test::run_command(cmd);
  }

  bool mpirun_started() const { return fs::exists(marker_); }

  // A bad setting: the error (exit status 1, as every other option error of
  // `tessera run`), its message, and mpirun never started.
  void expect_refused(const std::string& args, const std::string& message) {
    Result r = run(args + " " + script_);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("ValueError: [run] ", 0), 0u) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos)
        << args << "\nexpected: " << message << "\ngot: " << r.out;
    EXPECT_FALSE(mpirun_started()) << args;
  }

  std::string dir_, marker_, script_;
};

TEST_F(RunMesh, BadMeshesAreRefusedBeforeMpirunStarts) {
  expect_refused("-n 4 --mesh data=2,model=2",
                 "[run] --mesh: unknown axis 'model' in 'data=2,model=2' (the axes are data, "
                 "tensor, pipeline)");
  expect_refused("-n 4 --mesh data=0,tensor=4",
                 "[run] --mesh: the size of axis 'data' must be a positive integer (at most "
                 "1048576), got '0' in 'data=0,tensor=4'");
  expect_refused("-n 4 --mesh data=two",
                 "[run] --mesh: the size of axis 'data' must be a positive integer (at most "
                 "1048576), got 'two' in 'data=two'");
  expect_refused("-n 4 --mesh=data=-2", "got '-2' in 'data=-2'");
  expect_refused("-n 4 --mesh data=2,data=2",
                 "[run] --mesh: axis 'data' is given twice, in 'data=2,data=2'");
  expect_refused("-n 4 --mesh data", "[run] --mesh: 'data' is not axis=size");
  expect_refused("-n 4 --mesh data=4,", "[run] --mesh: an empty axis=size pair in 'data=4,'");
  expect_refused("-n 4 --mesh data=2,tensor=2,pipeline=2",
                 "[run] --mesh data=2,tensor=2,pipeline=2 makes 8 ranks (data 2 x tensor 2 x "
                 "pipeline 2), but -n is 4 (the product of the sizes must equal the number of "
                 "ranks; missing axes are 1)");
  expect_refused("-n 4 --mesh tensor=3",
                 "makes 3 ranks (data 1 x tensor 3 x pipeline 1), but -n is 4");
}

TEST_F(RunMesh, BadZeroAndMicrobatchesAreRefused) {
  expect_refused("-n 4 --zero 4", "[run] --zero must be a ZeRO stage 0, 1, 2 or 3, got '4'");
  expect_refused("-n 4 --zero one", "[run] --zero must be a ZeRO stage 0, 1, 2 or 3, got 'one'");
  expect_refused("-n 4 --microbatches 0",
                 "[run] --microbatches must be a positive integer (at most 1048576), got '0'");
  expect_refused("-n 4 --mesh pipeline=4 --microbatches 2",
                 "[run] --microbatches 2 is fewer micro-batches than the pipeline's 4 stages "
                 "(--mesh pipeline=4): every stage needs at least one micro-batch");
  expect_refused("-n 4 --params 100M", "[run] --params 100M is for --dry-run");
  expect_refused("-n 4 --dry-run --params 100X",
                 "[run] --params must be a parameter count from 1 to 1e15 such as 350000, 100M "
                 "or 1.5B (suffixes K, M, B or G, T), got '100X'");
}

TEST_F(RunMesh, MeshFromTheEnvironmentIsCheckedToo) {
  Result r = run("-n 4 " + script_, "TESSERA_MESH=data=3");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_FALSE(mpirun_started());
  EXPECT_NE(r.out.find("ValueError: [run] TESSERA_MESH (environment) data=3 makes 3 ranks (data 3 "
                       "x tensor 1 x pipeline 1), but -n is 4"),
            std::string::npos)
      << r.out;
  r = run("-n 4 " + script_, "TESSERA_ZERO=5");
  EXPECT_NE(r.out.find("ValueError: [run] TESSERA_ZERO (environment) must be a ZeRO stage 0, 1, 2 "
                       "or 3, got '5'"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(mpirun_started());
}

TEST_F(RunMesh, GoodMeshReachesTheRanks) {
  Result r = run("-n 8 --mesh tensor=2,pipeline=2,data=2 --zero 2 --microbatches 8 " + script_);
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_TRUE(mpirun_started()) << r.out;
  std::ifstream in(marker_);
  std::string args((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Passed on by name (-x VAR) like every TESSERA_ variable.
  EXPECT_NE(args.find("-x TESSERA_MESH "), std::string::npos) << args;
  EXPECT_NE(args.find("-x TESSERA_ZERO "), std::string::npos) << args;
  EXPECT_NE(args.find("-x TESSERA_MICROBATCHES "), std::string::npos) << args;
  // With their values in the launcher's environment, which mpirun hands on:
  // all three axes, in the documented order.
  EXPECT_NE(args.find("TESSERA_MESH=data=2,tensor=2,pipeline=2\n"), std::string::npos) << args;
  EXPECT_NE(args.find("TESSERA_ZERO=2\n"), std::string::npos) << args;
  EXPECT_NE(args.find("TESSERA_MICROBATCHES=8\n"), std::string::npos) << args;
  // --mesh data=4 on 4 ranks: plain data parallelism.
  fs::remove(marker_);
  r = run("-n 4 --mesh data=4 " + script_);
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream again(marker_);
  args.assign(std::istreambuf_iterator<char>(again), std::istreambuf_iterator<char>());
  EXPECT_NE(args.find("TESSERA_MESH=data=4,tensor=1,pipeline=1\n"), std::string::npos) << args;
}

TEST_F(RunMesh, HelpNamesTheMeshOptions) {
  Result r = run("--help");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* line :
       {"  --mesh data=D,tensor=T,pipeline=P\n",
        "  --zero S               ZeRO stage 0, 1, 2 or 3 (TESSERA_ZERO), read by fit: over the "
        "data\n",
        "  --dry-run              start nothing", "  --params P             with --dry-run"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
}

TEST_F(RunMesh, DryRunPrintsThePlacementOnTwoHosts) {
  Result r =
      run("-n 8 --mesh data=2,tensor=2,pipeline=2 --hosts hostA:4,hostB:4 --dry-run " + script_);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(mpirun_started()) << r.out;
  const std::string expected =
      "tessera run --dry-run: 8 ranks, mesh data=2,tensor=2,pipeline=2 (nothing started)\n"
      "rank = (data * 2 + pipeline) * 2 + tensor (tensor innermost: consecutive ranks share a "
      "host)\n"
      "hosts: hostA (4 slots), hostB (4 slots), ranks placed by slot as mpirun places them\n"
      "  rank   data  pipeline  tensor  host\n"
      "     0      0         0       0  hostA\n"
      "     1      0         0       1  hostA\n"
      "     2      0         1       0  hostA\n"
      "     3      0         1       1  hostA\n"
      "     4      1         0       0  hostB\n"
      "     5      1         0       1  hostB\n"
      "     6      1         1       0  hostB\n"
      "     7      1         1       1  hostB\n"
      "groups along data (4 groups of 2): [0, 4] [1, 5] [2, 6] [3, 7] (4 across hosts)\n"
      "groups along pipeline (4 groups of 2): [0, 2] [1, 3] [4, 6] [5, 7] (each within one host)\n"
      "groups along tensor (4 groups of 2): [0, 1] [2, 3] [4, 5] [6, 7] (each within one host)\n"
      "ZeRO stage 0 (TESSERA_ZERO, TESSERA_MICROBATCHES: read by fit)\n";
  EXPECT_EQ(r.out, expected);
}

TEST_F(RunMesh, DryRunPlacesByNodeAndFromAHostfile) {
  {
    std::ofstream hf(dir_ + "/hosts");
    hf << "# two hosts\nnodeA slots=2\nnodeB slots=2\n";
  }
  Result r = run("-n 4 --mesh data=2,tensor=2 --hostfile " + dir_ + "/hosts --dry-run");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("     1      0         0       1  nodeA\n"
                       "     2      1         0       0  nodeB\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("groups along tensor (2 groups of 2): [0, 1] [2, 3] (each within one host)"),
            std::string::npos)
      << r.out;
  r = run("-n 4 --mesh data=2,tensor=2 --hosts nodeA:2,nodeB:2 --map-by node --dry-run");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("     0      0         0       0  nodeA\n"
                       "     1      0         0       1  nodeB\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("groups along tensor (2 groups of 2): [0, 1] [2, 3] (2 across hosts)"),
            std::string::npos)
      << r.out;
  r = run("-n 4 --hosts nodeA:1,nodeB:1 --dry-run");
  EXPECT_NE(r.out.find("hosts not predicted: the hosts have 2 slots for 4 ranks"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(mpirun_started());
}

// Model-state bytes per locality, fp32 Adam, P = 100M on data=2, tensor=2,
// pipeline=2: P' = P/(t*p) = 25M; 16P' = 400 MB without ZeRO, (8 + 8/2)P' =
// 300 MB at stage 1, (4 + 12/2)P' = 250 MB at stage 2, 16P'/2 = 200 MB at 3.
TEST_F(RunMesh, DryRunMemoryFollowsTheZeroFormulas) {
  const char* totals[] = {"400,000,000", "300,000,000", "250,000,000", "200,000,000"};
  const char* formulas[] = {"16P'", "(8 + 8/2)P'", "(4 + 12/2)P'", "16P'/2"};
  for (int stage = 0; stage < 4; ++stage) {
    Result r = run("-n 8 --mesh data=2,tensor=2,pipeline=2 --zero " + std::to_string(stage) +
                   " --microbatches 4 --params 100M --dry-run");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("ZeRO stage " + std::to_string(stage) + ", 4 micro-batches"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("100,000,000 parameters (P' = P/(tensor*pipeline) = 25,000,000"),
              std::string::npos)
        << r.out;
    const std::string total = std::string("  total") + std::string(12, ' ') +
                              std::string(20 - std::string(totals[stage]).size(), ' ') +
                              totals[stage] + " bytes";
    EXPECT_NE(r.out.find(total), std::string::npos) << "stage " << stage << "\n" << r.out;
    EXPECT_NE(r.out.find(formulas[stage]), std::string::npos) << r.out;
  }
  // Stage 2: weights whole, gradients and optimizer state halved.
  Result r = run("-n 8 --mesh data=2,tensor=2,pipeline=2 --zero 2 --params 100M --dry-run");
  EXPECT_NE(r.out.find("  weights                   100,000,000 bytes  95.37 MiB    4P'\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  gradients                  50,000,000 bytes  47.68 MiB    4P'/2\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  optimizer state           100,000,000 bytes  95.37 MiB    8P'/2\n"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(mpirun_started());
}

}  // namespace
