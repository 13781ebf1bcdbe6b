// model.py's SimGrid model in C++ against libsimgrid: the same platform, routes, pattern and output.
//
// SimGrid's Python bindings run every actor on a system thread (contexts/factory:thread), so a
// ring of 1,024 actors and 2 M messages spends most of its time switching threads. Here actors run
// on SimGrid's default (raw) contexts: this is SimGrid at its own speed. See model.py for the model
// settings and the two latency modes; the comments there hold here.
//
// Build (run.py does it, into ~/.cache/netsim-simgrid/bin):
//   g++ -O2 -std=c++17 model.cpp -I$PREFIX/include -L$PREFIX/lib -Wl,-rpath,$PREFIX/lib -lsimgrid
// Run: model-cpp PLAN (a plan file written by plan.py); prints one JSON line.

#include <simgrid/s4u.hpp>
#include <simgrid/version.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

constexpr int SAME_LEAF = -1;
constexpr int ALL_SPINES = -2;

struct Message {
  int src, dst, spine;
};

struct Plan {
  std::map<std::string, std::string> fields;
  std::vector<Message> messages;

  std::string str(const std::string& key) const { return fields.at(key); }
  double num(const std::string& key) const { return std::stod(fields.at(key)); }
  int integer(const std::string& key) const { return std::stoi(fields.at(key)); }
};

Plan read_plan(const char* path)
{
  std::ifstream in(path);
  std::string key, value;
  in >> key >> value;
  if (key != "netsim-simgrid-plan" || value != "1") {
    std::cerr << path << ": not a plan written by plan.py\n";
    std::exit(2);
  }
  Plan plan;
  while (in >> key >> value) {
    if (key == "messages") {
      plan.messages.resize(std::stoul(value));
      for (auto& m : plan.messages)
        in >> m.src >> m.dst >> m.spine;
      break;
    }
    plan.fields[key] = value;
  }
  return plan;
}

// The leaf-spine as SimGrid links, hosts (one endpoint per spine when sprayed) and routes.
struct Fabric {
  const Plan& plan;
  int hosts, spines, hosts_per_leaf;
  bool sprayed;
  std::vector<std::vector<sg4::Host*>> endpoint;  // endpoint[h][j]: host h's endpoint for spine j
  int n_links;

  Fabric(sg4::Engine& engine, const Plan& p) : plan(p)
  {
    hosts          = p.integer("hosts");
    spines         = p.integer("spines");
    hosts_per_leaf = p.integer("hosts_per_leaf");
    int leaves     = p.integer("leaves");
    bool native    = p.str("latency") == "simgrid";
    double nic_lat = native ? p.num("nic_latency_s") : 0.0;
    double up_lat  = native ? p.num("uplink_latency_s") : 0.0;
    sprayed        = p.str("routing") == "spray";
    auto* zone     = engine.get_netzone_root()->add_netzone_full("fabric");
    auto link      = [zone](const std::string& name, double bw, double lat) {
      return zone->add_link(name, bw)->set_latency(lat)->seal();
    };
    std::vector<const sg4::Link*> nic_up, nic_down;
    for (int h = 0; h < hosts; h++) {
      std::string leaf = "leaf" + std::to_string(h / hosts_per_leaf), host = "h" + std::to_string(h);
      nic_up.push_back(link(host + ".nic->" + leaf, p.num("nic_Bps"), nic_lat));
      nic_down.push_back(link(leaf + "->" + host + ".nic", p.num("nic_Bps"), nic_lat));
    }
    std::vector<std::vector<const sg4::Link*>> up(leaves), down(spines);
    for (int lf = 0; lf < leaves; lf++)
      for (int s = 0; s < spines; s++)
        up[lf].push_back(link("leaf" + std::to_string(lf) + "->spine" + std::to_string(s), p.num("uplink_Bps"), up_lat));
    for (int s = 0; s < spines; s++)
      for (int lf = 0; lf < leaves; lf++)
        down[s].push_back(link("spine" + std::to_string(s) + "->leaf" + std::to_string(lf), p.num("uplink_Bps"), up_lat));
    int ends = sprayed ? spines : 1;
    endpoint.resize(hosts);
    for (int h = 0; h < hosts; h++)
      for (int j = 0; j < ends; j++)
        endpoint[h].push_back(
            zone->add_host("h" + std::to_string(h) + (sprayed ? "." + std::to_string(j) : ""), 1e9)->seal());
    for (auto const& m : p.messages) {
      if (m.spine == SAME_LEAF) {
        route(zone, endpoint[m.src][0], endpoint[m.dst][0], {nic_up[m.src], nic_down[m.dst]});
        continue;
      }
      int first = m.spine == ALL_SPINES ? 0 : m.spine, last = m.spine == ALL_SPINES ? spines - 1 : m.spine;
      for (int j = first; j <= last; j++)
        route(zone, endpoint[m.src][sprayed ? j : 0], endpoint[m.dst][sprayed ? j : 0],
              {nic_up[m.src], up[m.src / hosts_per_leaf][j], down[j][m.dst / hosts_per_leaf], nic_down[m.dst]});
    }
    zone->seal();
    n_links = 2 * hosts + 2 * leaves * spines;
  }

  static void route(sg4::NetZone* zone, const sg4::Host* src, const sg4::Host* dst,
                    const std::vector<const sg4::Link*>& links)
  {
    std::vector<sg4::LinkInRoute> in_route;
    for (auto const* l : links)
      in_route.emplace_back(l);
    zone->add_route(src, dst, in_route, false);
  }

  // What netsim adds after a message's last byte: its path latency plus the NIC's overhead.
  double delay_s(int s, int d) const
  {
    double lat = 2 * plan.num("nic_latency_s");
    if (s / hosts_per_leaf != d / hosts_per_leaf)
      lat += 2 * plan.num("uplink_latency_s");
    return lat + plan.num("overhead_s");
  }
};

struct Result {
  double sim_time_s = 0;
  long flows        = 0;
  std::set<double> finishes;  // distinct flow completion times: the instants SimGrid re-solved sharing at
};

// Every host sends its message to every other at once; done when the last one has arrived.
void alltoall(sg4::Engine& engine, const Fabric& fab, Result& result)
{
  const Plan& plan = fab.plan;
  bool add_delay   = plan.str("latency") == "netsim";
  // Sprayed, every message is split, on one leaf too (see model.py).
  int parts   = fab.sprayed ? fab.spines : 1;
  auto bytes  = static_cast<uint64_t>(plan.num("message_bytes") / parts);
  std::map<int, std::vector<Message>> by_src;
  for (auto const& m : plan.messages)
    by_src[m.src].push_back(m);
  for (auto const& [src, mine] : by_src) {
    fab.endpoint[src][0]->add_actor("rank" + std::to_string(src), [&fab, &result, &mine, parts, bytes, add_delay]() {
      // One actor per sender, as netsim's ranks: post every send, wait for all.
      sg4::ActivitySet comms;
      std::vector<std::pair<sg4::CommPtr, double>> sent;
      for (auto const& m : mine)
        for (int j = 0; j < parts; j++) {
          int end = m.spine == ALL_SPINES ? j : 0;
          auto c  = sg4::Comm::sendto_async(fab.endpoint[m.src][end], fab.endpoint[m.dst][end], bytes);
          comms.push(c);
          sent.emplace_back(c, add_delay ? fab.delay_s(m.src, m.dst) : 0.0);
        }
      comms.wait_all();
      for (auto const& [c, delay] : sent) {
        result.sim_time_s = std::max(result.sim_time_s, c->get_finish_time() + delay);
        result.finishes.insert(c->get_finish_time());
      }
      result.flows += static_cast<long>(sent.size());
    });
  }
  engine.run();
}

// Ring all-reduce in rank order: rank r sends step k to r + 1 once step k - 1 from r - 1 has arrived.
void ring(sg4::Engine& engine, const Fabric& fab, Result& result)
{
  const Plan& plan = fab.plan;
  int n = fab.hosts, steps = plan.integer("steps");
  auto bytes     = static_cast<uint64_t>(plan.num("message_bytes"));
  bool add_delay = plan.str("latency") == "netsim";
  std::vector<int> succ(n);
  for (auto const& m : plan.messages)
    succ[m.src] = m.dst;
  std::vector<sg4::Mailbox*> boxes;
  for (int r = 0; r < n; r++)
    boxes.push_back(engine.mailbox_by_name_or_create("rank" + std::to_string(r)));
  static int payload = 0;
  for (int r = 0; r < n; r++) {
    fab.endpoint[r][0]->add_actor("rank" + std::to_string(r), [&, r]() {
      // Eager mailbox: a message flows as soon as it is sent, as netsim's.
      boxes[r]->set_receiver(sg4::Actor::self());
      double pred_delay = fab.delay_s((r - 1 + n) % n, r);
      for (int k = 0; k < steps; k++) {
        if (k) {
          boxes[r]->get<int>();
          if (add_delay)
            sg4::this_actor::sleep_for(pred_delay);
        }
        boxes[succ[r]]->put_init(&payload, bytes)->detach();
      }
      boxes[r]->get<int>();
      if (add_delay)
        sg4::this_actor::sleep_for(pred_delay);
      boxes[r]->set_receiver(nullptr);
      result.flows += steps;
    });
  }
  engine.run();
  result.sim_time_s = sg4::Engine::get_clock();
}

}  // namespace

int main(int argc, char** argv)
{
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " PLAN\n";
    return 2;
  }
  Plan plan = read_plan(argv[1]);
  auto t0   = std::chrono::steady_clock::now();
  // Plain max-min (see model.py for each option).
  std::vector<std::string> args = {argv[0], "--cfg=network/model:CM02", "--cfg=network/latency-factor:1",
                                   "--cfg=network/bandwidth-factor:1", "--cfg=network/weight-S:0",
                                   "--cfg=network/TCP-gamma:0", "--cfg=network/crosstraffic:0",
                                   "--log=root.thres:warning"};
  std::vector<char*> cargs;
  for (auto& a : args)
    cargs.push_back(a.data());
  int cargc = static_cast<int>(cargs.size());
  sg4::Engine engine(&cargc, cargs.data());
  Fabric fab(engine, plan);
  auto t1 = std::chrono::steady_clock::now();
  Result result;
  if (plan.str("pattern") == "alltoall")
    alltoall(engine, fab, result);
  else
    ring(engine, fab, result);
  auto t2   = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  int major = 0, minor = 0, patch = 0;
  sg_version_get(&major, &minor, &patch);  // the library's, not the headers'

  std::printf("{\"scenario\": \"%s\", \"pattern\": \"%s\", \"routing\": \"%s\", \"latency\": \"%s\", "
              "\"simgrid\": \"%d.%d.%d\", \"bindings\": \"C++\", \"hosts\": %d, \"links\": %d, "
              "\"sim_time_s\": %.17g, \"flows\": %ld, \"finish_instants\": %zu, \"build_s\": %.3f, \"run_s\": %.3f}\n",
              plan.str("scenario").c_str(), plan.str("pattern").c_str(), plan.str("routing").c_str(),
              plan.str("latency").c_str(), major, minor, patch,
              fab.hosts, fab.n_links, result.sim_time_s, result.flows, result.finishes.size(), secs(t0, t1),
              secs(t1, t2));
  return 0;
}
