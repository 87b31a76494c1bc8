// crush_do_rule and the bucket choose functions (rados-client.md §2.5–2.7),
// bit-exact with Ceph's mapper.c. Where Ceph would follow a pointer the map
// does not hold (an item naming a missing bucket), this code treats the item
// as unusable instead, so a malformed map gives short results, never a crash.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "crush.h"
#include "hash.h"

namespace siphon::osdmap {
namespace {

constexpr std::int32_t kItemUndef = 0x7ffffffe;  // CRUSH_ITEM_UNDEF (internal)

// Per-call scratch of the uniform/permutation choose, one per bucket slot
// (Ceph userspace builds a fresh workspace for every do_rule call).
struct PermWork {
  std::uint32_t perm_x = 0;
  std::uint32_t perm_n = 0;
  std::vector<std::uint32_t> perm;
};

class Mapper {
 public:
  Mapper(const CrushMap& map, const std::vector<std::uint32_t>& weights,
         const ChooseArgMap* choose_args)
      : map_(map), weights_(weights), args_(choose_args), work_(map.buckets.size()) {}

  std::vector<std::int32_t> run(const CrushRule& rule, std::uint32_t x, int result_max);
  bool exhausted() const noexcept { return exhausted_; }

 private:
  // Work bound: every bucket visit costs its size. Real maps need a tiny
  // fraction of this; a corrupt one (2^31 replicas, 2^32 tries, cycles) would
  // otherwise keep Ceph's loops running for hours. Exhausting it ends the
  // mapping with no result (do_rule reports it).
  bool spend(std::size_t n) noexcept {
    if (exhausted_ || n > budget_) {
      exhausted_ = true;
      return false;
    }
    budget_ -= n;
    return true;
  }

  std::uint32_t slot(const CrushBucket& b) const noexcept {
    return static_cast<std::uint32_t>(-1 - static_cast<std::int64_t>(b.id));
  }
  const ChooseArg* arg_for(const CrushBucket& b) const noexcept {
    if (!args_) return nullptr;
    const auto it = args_->find(slot(b));
    return it == args_->end() ? nullptr : &it->second;
  }

  bool is_out(std::int32_t item, std::uint32_t x) const noexcept {
    if (item < 0 || static_cast<std::size_t>(item) >= weights_.size()) return true;
    const std::uint32_t w = weights_[static_cast<std::size_t>(item)];
    if (w >= 0x10000) return false;
    if (w == 0) return true;
    return (crush_hash32_2(kCrushHashRjenkins1, x, static_cast<std::uint32_t>(item)) & 0xffff) >= w;
  }

  // The type of an item: 0 for devices, the bucket's type, or nullopt for
  // a negative id naming no bucket (Ceph would dereference null).
  std::optional<int> item_type(std::int32_t item) const noexcept {
    if (item >= 0) return 0;
    const CrushBucket* b = map_.bucket(item);
    if (!b) return std::nullopt;
    return b->type;
  }

  std::int32_t perm_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r);
  std::int32_t uniform_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r) {
    return perm_choose(b, x, r);
  }
  std::int32_t list_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r) const;
  std::int32_t tree_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r) const;
  std::int32_t straw_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r) const;
  std::int32_t straw2_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r,
                             int position) const;
  std::int32_t bucket_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r, int position);

  int choose_firstn(const CrushBucket& bucket, std::uint32_t x, int numrep, int type,
                    std::int32_t* out, int outpos, int out_size, unsigned tries,
                    unsigned recurse_tries, unsigned local_retries, unsigned local_fallback,
                    bool recurse_to_leaf, unsigned vary_r, unsigned stable, std::int32_t* out2,
                    int parent_r);
  void choose_indep(const CrushBucket& bucket, std::uint32_t x, int left, int numrep, int type,
                    std::int32_t* out, int outpos, unsigned tries, unsigned recurse_tries,
                    bool recurse_to_leaf, std::int32_t* out2, int parent_r);

  const CrushMap& map_;
  const std::vector<std::uint32_t>& weights_;
  const ChooseArgMap* args_;
  std::vector<PermWork> work_;
  std::size_t budget_ = std::size_t{1} << 24;
  bool exhausted_ = false;
};

std::int32_t Mapper::perm_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r) {
  const auto size = static_cast<std::uint32_t>(b.items.size());
  const std::uint32_t pr = r % size;
  PermWork& w = work_[slot(b)];
  if (w.perm.size() != size) w.perm.assign(size, 0);
  if (w.perm_x != x || w.perm_n == 0) {
    w.perm_x = x;
    if (pr == 0) {  // the common r = 0 case, without building the permutation
      const std::uint32_t s =
          crush_hash32_3(b.hash, x, static_cast<std::uint32_t>(b.id), 0) % size;
      w.perm[0] = s;
      w.perm_n = 0xffff;
      return b.items[s];
    }
    for (std::uint32_t i = 0; i < size; ++i) w.perm[i] = i;
    w.perm_n = 0;
  } else if (w.perm_n == 0xffff) {  // finish what the r = 0 shortcut started
    for (std::uint32_t i = 1; i < size; ++i) w.perm[i] = i;
    w.perm[w.perm[0]] = 0;
    w.perm_n = 1;
  }
  while (w.perm_n <= pr) {
    const std::uint32_t p = w.perm_n;
    if (p < size - 1) {
      const std::uint32_t i =
          crush_hash32_3(b.hash, x, static_cast<std::uint32_t>(b.id), p) % (size - p);
      if (i) std::swap(w.perm[p + i], w.perm[p]);
    }
    w.perm_n++;
  }
  return b.items[w.perm[pr]];
}

std::int32_t Mapper::list_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r) const {
  for (std::size_t i = b.items.size(); i-- > 0;) {
    std::uint64_t w = crush_hash32_4(b.hash, x, static_cast<std::uint32_t>(b.items[i]), r,
                                     static_cast<std::uint32_t>(b.id));
    w &= 0xffff;
    w *= b.sum_weights[i];
    w >>= 16;
    if (w < b.item_weights[i]) return b.items[i];
  }
  return b.items[0];
}

std::int32_t Mapper::tree_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r) const {
  const auto num_nodes = static_cast<std::uint32_t>(b.node_weights.size());
  std::uint32_t n = num_nodes >> 1;
  // Ceph walks from the root down to a terminal (odd) node; a node index the
  // encoding does not hold ends the walk at the first item instead.
  while (n != 0 && (n & 1) == 0) {
    const std::uint64_t t =
        (static_cast<std::uint64_t>(crush_hash32_4(b.hash, x, n, r, static_cast<std::uint32_t>(b.id))) *
         b.node_weights[n]) >> 32;
    const int h = std::countr_zero(n);
    const std::uint32_t l = n - (1u << (h - 1));
    if (l >= num_nodes) return b.items[0];
    n = t < b.node_weights[l] ? l : n + (1u << (h - 1));
    if (n >= num_nodes) return b.items[0];
  }
  const std::uint32_t idx = n >> 1;
  return idx < b.items.size() ? b.items[idx] : b.items[0];
}

std::int32_t Mapper::straw_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r) const {
  std::size_t high = 0;
  std::uint64_t high_draw = 0;
  for (std::size_t i = 0; i < b.items.size(); ++i) {
    std::uint64_t draw = crush_hash32_3(b.hash, x, static_cast<std::uint32_t>(b.items[i]), r);
    draw &= 0xffff;
    draw *= b.straws[i];
    if (i == 0 || draw > high_draw) {
      high = i;
      high_draw = draw;
    }
  }
  return b.items[high];
}

std::int32_t Mapper::straw2_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r,
                                   int position) const {
  const std::uint32_t* weights = b.item_weights.data();
  const std::int32_t* ids = b.items.data();
  if (const ChooseArg* a = arg_for(b)) {
    // Sizes were checked against the bucket when the map was decoded.
    if (!a->weight_set.empty()) {
      const auto pos = std::min<std::size_t>(static_cast<std::size_t>(std::max(position, 0)),
                                             a->weight_set.size() - 1);
      weights = a->weight_set[pos].data();
    }
    if (!a->ids.empty()) ids = a->ids.data();
  }
  std::size_t high = 0;
  std::int64_t high_draw = 0;
  for (std::size_t i = 0; i < b.items.size(); ++i) {
    std::int64_t draw;
    if (weights[i]) {
      const std::uint32_t u =
          crush_hash32_3(b.hash, x, static_cast<std::uint32_t>(ids[i]), r) & 0xffff;
      const std::int64_t ln = static_cast<std::int64_t>(crush_ln(u)) - 0x1000000000000ll;
      // Ceph passes the weight as an int and divides truncating toward zero.
      draw = ln / static_cast<std::int64_t>(static_cast<std::int32_t>(weights[i]));
    } else {
      draw = std::numeric_limits<std::int64_t>::min();
    }
    if (i == 0 || draw > high_draw) {
      high = i;
      high_draw = draw;
    }
  }
  return b.items[high];
}

std::int32_t Mapper::bucket_choose(const CrushBucket& b, std::uint32_t x, std::uint32_t r,
                                   int position) {
  switch (static_cast<BucketAlg>(b.alg)) {
    case BucketAlg::uniform: return uniform_choose(b, x, r);
    case BucketAlg::list: return list_choose(b, x, r);
    case BucketAlg::tree: return tree_choose(b, x, r);
    case BucketAlg::straw: return straw_choose(b, x, r);
    case BucketAlg::straw2: return straw2_choose(b, x, r, position);
  }
  return b.items[0];
}

int Mapper::choose_firstn(const CrushBucket& bucket, std::uint32_t x, int numrep, int type,
                          std::int32_t* out, int outpos, int out_size, unsigned tries,
                          unsigned recurse_tries, unsigned local_retries, unsigned local_fallback,
                          bool recurse_to_leaf, unsigned vary_r, unsigned stable,
                          std::int32_t* out2, int parent_r) {
  int count = out_size;
  std::int32_t item = 0;
  for (int rep = stable ? 0 : outpos; rep < numrep && count > 0 && !exhausted_; ++rep) {
    unsigned ftotal = 0;
    bool skip_rep = false;
    bool retry_descent;
    do {
      retry_descent = false;
      const CrushBucket* in = &bucket;
      unsigned flocal = 0;
      std::size_t depth = 0;  // a hierarchy with a cycle would descend forever
      bool retry_bucket;
      do {
        bool collide = false;
        bool reject = false;
        retry_bucket = false;
        if (!spend(in->items.size() + 1)) {
          skip_rep = true;
          break;
        }
        // Ceph's int arithmetic; a corrupt map's counts could overflow it, so
        // it is done modulo 2^32 (what Ceph's compiled code does) and read back.
        const int r = static_cast<int>(static_cast<std::uint32_t>(rep) + static_cast<std::uint32_t>(parent_r) + ftotal);
        int itemtype = 0;
        if (in->items.empty()) {
          reject = true;
        } else {
          if (local_fallback > 0 && flocal >= (in->items.size() >> 1) && flocal > local_fallback)
            item = perm_choose(*in, x, static_cast<std::uint32_t>(r));
          else
            item = bucket_choose(*in, x, static_cast<std::uint32_t>(r), outpos);
          if (item >= map_.max_devices) {
            skip_rep = true;
            break;
          }
          const auto t = item_type(item);
          if (!t) {
            skip_rep = true;
            break;
          }
          itemtype = *t;
          if (itemtype != type) {
            if (item >= 0 || ++depth > map_.buckets.size()) {
              skip_rep = true;
              break;
            }
            in = map_.bucket(item);
            retry_bucket = true;
            continue;
          }
          for (int i = 0; i < outpos; ++i) {
            if (out[i] == item) {
              collide = true;
              break;
            }
          }
          if (!collide && recurse_to_leaf) {
            if (item < 0) {
              // chooseleaf_vary_r is 0 or 1 in any real map; a corrupt map's
              // larger value shifts as Ceph's compiled code does on x86 (the
              // count taken mod 32), never by 32 or more (undefined).
              const int sub_r = vary_r ? (r >> ((vary_r - 1) & 31)) : 0;
              if (choose_firstn(*map_.bucket(item), x, stable ? 1 : outpos + 1, 0, out2, outpos,
                                count, recurse_tries, 0, local_retries, local_fallback, false,
                                vary_r, stable, nullptr, sub_r) <= outpos)
                reject = true;  // no usable leaf below this item
            } else {
              out2[outpos] = item;
            }
          }
          if (!reject && !collide && itemtype == 0) reject = is_out(item, x);
        }
        if (reject || collide) {
          depth = 0;  // retries are bounded by flocal/ftotal, descents by depth
          ftotal++;
          flocal++;
          if (collide && flocal <= local_retries)
            retry_bucket = true;  // retry locally a few times
          else if (local_fallback > 0 && flocal <= in->items.size() + local_fallback)
            retry_bucket = true;  // exhaustive bucket search
          else if (ftotal < tries)
            retry_descent = true;  // then retry the descent
          else
            skip_rep = true;  // give up on this replica
        }
      } while (retry_bucket);
    } while (retry_descent);
    if (skip_rep) continue;
    out[outpos++] = item;
    count--;
  }
  return outpos;
}

void Mapper::choose_indep(const CrushBucket& bucket, std::uint32_t x, int left, int numrep,
                          int type, std::int32_t* out, int outpos, unsigned tries,
                          unsigned recurse_tries, bool recurse_to_leaf, std::int32_t* out2,
                          int parent_r) {
  const int endpos = outpos + left;
  for (int rep = outpos; rep < endpos; ++rep) {
    out[rep] = kItemUndef;
    if (out2) out2[rep] = kItemUndef;
  }
  auto set_none = [&](int rep) {
    out[rep] = kCrushItemNone;
    if (out2) out2[rep] = kCrushItemNone;
    --left;
  };
  for (unsigned ftotal = 0; left > 0 && ftotal < tries && !exhausted_; ++ftotal) {
    for (int rep = outpos; rep < endpos && !exhausted_; ++rep) {
      if (out[rep] != kItemUndef) continue;
      const CrushBucket* in = &bucket;
      std::size_t depth = 0;  // a hierarchy with a cycle would descend forever
      for (;;) {
        if (!spend(in->items.size() + 1)) break;
        // Ceph's int arithmetic, modulo 2^32 (see choose_firstn).
        std::uint32_t ur = static_cast<std::uint32_t>(rep) + static_cast<std::uint32_t>(parent_r);
        if (in->alg == static_cast<std::uint8_t>(BucketAlg::uniform) && numrep > 0 &&
            in->items.size() % static_cast<std::size_t>(numrep) == 0)
          ur += (static_cast<std::uint32_t>(numrep) + 1) * ftotal;
        else
          ur += static_cast<std::uint32_t>(numrep) * ftotal;
        const int r = static_cast<int>(ur);
        if (in->items.empty()) break;
        const std::int32_t item = bucket_choose(*in, x, static_cast<std::uint32_t>(r), outpos);
        if (item >= map_.max_devices) {
          set_none(rep);
          break;
        }
        const auto t = item_type(item);
        if (!t) {
          set_none(rep);
          break;
        }
        if (*t != type) {
          if (item >= 0 || ++depth > map_.buckets.size()) {
            set_none(rep);
            break;
          }
          in = map_.bucket(item);
          continue;
        }
        bool collide = false;
        for (int i = outpos; i < endpos; ++i) {
          if (out[i] == item) {
            collide = true;
            break;
          }
        }
        if (collide) break;
        if (recurse_to_leaf) {
          if (item < 0) {
            choose_indep(*map_.bucket(item), x, 1, numrep, 0, out2, rep, recurse_tries, 0, false,
                         nullptr, r);
            if (out2[rep] == kCrushItemNone) break;  // placed nothing: no leaf
          } else {
            out2[rep] = item;
          }
        }
        if (*t == 0 && is_out(item, x)) break;
        out[rep] = item;
        --left;
        break;
      }
    }
  }
  for (int rep = outpos; rep < endpos; ++rep) {
    if (out[rep] == kItemUndef) out[rep] = kCrushItemNone;
    if (out2 && out2[rep] == kItemUndef) out2[rep] = kCrushItemNone;
  }
}

std::vector<std::int32_t> Mapper::run(const CrushRule& rule, std::uint32_t x, int result_max) {
  const CrushTunables& t = map_.tunables;
  // choose_total_tries counts retries, not tries: add one (as Ceph).
  unsigned choose_tries = t.choose_total_tries + 1;
  unsigned choose_leaf_tries = 0;
  unsigned local_retries = t.choose_local_tries;
  unsigned local_fallback = t.choose_local_fallback_tries;
  unsigned vary_r = t.chooseleaf_vary_r;
  unsigned stable = t.chooseleaf_stable;

  const auto rmax = static_cast<std::size_t>(result_max);
  std::vector<std::int32_t> result;
  std::vector<std::int32_t> w, o(rmax), c(rmax);
  for (const CrushStep& step : rule.steps) {
    bool firstn = false;
    switch (static_cast<RuleOp>(step.op)) {
      case RuleOp::take:
        if ((step.arg1 >= 0 && step.arg1 < map_.max_devices) || map_.bucket(step.arg1))
          w.assign(1, step.arg1);
        break;
      case RuleOp::set_choose_tries:
        if (step.arg1 > 0) choose_tries = static_cast<unsigned>(step.arg1);
        break;
      case RuleOp::set_chooseleaf_tries:
        if (step.arg1 > 0) choose_leaf_tries = static_cast<unsigned>(step.arg1);
        break;
      case RuleOp::set_choose_local_tries:
        if (step.arg1 >= 0) local_retries = static_cast<unsigned>(step.arg1);
        break;
      case RuleOp::set_choose_local_fallback_tries:
        if (step.arg1 >= 0) local_fallback = static_cast<unsigned>(step.arg1);
        break;
      case RuleOp::set_chooseleaf_vary_r:
        if (step.arg1 >= 0) vary_r = static_cast<unsigned>(step.arg1);
        break;
      case RuleOp::set_chooseleaf_stable:
        if (step.arg1 >= 0) stable = static_cast<unsigned>(step.arg1);
        break;
      case RuleOp::chooseleaf_firstn:
      case RuleOp::choose_firstn:
        firstn = true;
        [[fallthrough]];
      case RuleOp::chooseleaf_indep:
      case RuleOp::choose_indep: {
        if (w.empty()) break;
        const bool leaf = step.op == static_cast<std::uint32_t>(RuleOp::chooseleaf_firstn) ||
                          step.op == static_cast<std::uint32_t>(RuleOp::chooseleaf_indep);
        int osize = 0;
        for (const std::int32_t wi : w) {
          int numrep = step.arg1;
          if (numrep <= 0) {
            numrep += result_max;
            if (numrep <= 0) continue;
          }
          const CrushBucket* b = map_.bucket(wi);  // devices and NONE are skipped
          if (!b) continue;
          if (firstn) {
            const unsigned recurse_tries = choose_leaf_tries        ? choose_leaf_tries
                                           : t.chooseleaf_descend_once ? 1
                                                                       : choose_tries;
            osize += choose_firstn(*b, x, numrep, step.arg2, o.data() + osize, 0,
                                   result_max - osize, choose_tries, recurse_tries, local_retries,
                                   local_fallback, leaf, vary_r, stable, c.data() + osize, 0);
          } else {
            const int out_size = std::min(numrep, result_max - osize);
            choose_indep(*b, x, out_size, numrep, step.arg2, o.data() + osize, 0, choose_tries,
                         choose_leaf_tries ? choose_leaf_tries : 1, leaf, c.data() + osize, 0);
            osize += out_size;
          }
        }
        if (leaf) std::copy(c.begin(), c.begin() + osize, o.begin());
        w.assign(o.begin(), o.begin() + osize);
        break;
      }
      case RuleOp::emit:
        for (std::size_t i = 0; i < w.size() && result.size() < rmax; ++i) result.push_back(w[i]);
        w.clear();
        break;
      default:
        break;  // noop and unknown ops, as Ceph
    }
  }
  return result;
}

}  // namespace

int CrushMap::find_rule(int ruleset, int type, int size) const noexcept {
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const auto& r = rules[i];
    if (r && r->ruleset == ruleset && r->type == type && r->min_size <= size && r->max_size >= size)
      return static_cast<int>(i);
  }
  return -1;
}

const ChooseArgMap* CrushMap::choose_args_for(std::int64_t pool) const noexcept {
  auto it = choose_args.find(pool);
  if (it == choose_args.end()) it = choose_args.find(-1);
  return it == choose_args.end() ? nullptr : &it->second;
}

std::vector<std::int32_t> CrushMap::do_rule(int ruleno, std::uint32_t x, int result_max,
                                            const std::vector<std::uint32_t>& weights,
                                            const ChooseArgMap* args, bool* gave_up) const {
  if (gave_up) *gave_up = false;
  if (ruleno < 0 || static_cast<std::size_t>(ruleno) >= rules.size() || !rules[ruleno] ||
      result_max <= 0)
    return {};
  Mapper m(*this, weights, args);
  auto out = m.run(*rules[ruleno], x, result_max);
  if (gave_up) *gave_up = m.exhausted();
  if (m.exhausted()) out.clear();
  return out;
}

}  // namespace siphon::osdmap
