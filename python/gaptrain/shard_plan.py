"""How θ's P flat parameters are cut into the contiguous ranges S master
shards hold (spec.master.shards): services/engine/shard_plan.cc's PlanShards
exactly, so a trainer computes a shard's range from the model's layout as
the masters do (declaring a model to masters that wait for one: their
Describe then says only which shard of how many they are).

The ranges tile [0, P) in order, none empty. The cut k lies at k·P/S (integer
division), moved to the nearest tensor boundary when one is within an
eighth of a shard's fair share (P // S // 8) and strictly inside (0, P)
past the previous cut; otherwise it stays inside the tensor."""


def _nearest_tensor_boundary(ends, cut):
    """The tensor end (0 included) nearest to `cut`; the first on a tie."""
    best, best_distance = 0, cut
    for end in ends:
        distance = abs(end - cut)
        if distance < best_distance:
            best, best_distance = end, distance
    return best


def plan_shards(sizes, count):
    """[(begin, end)] of each of `count` shards of a model whose tensors
    have `sizes` values each, in layout order. ValueError when count is 0
    or above the model's parameter count (PlanShards' InvalidArgument)."""
    p = sum(sizes)
    if count <= 0:
        raise ValueError("a model needs at least one shard, got %d" % count)
    if count > p:
        raise ValueError("the model has %d parameters, fewer than its %d shards" % (p, count))
    ends, at = [], 0
    for size in sizes:
        at += size
        ends.append(at)
    tolerance = p // count // 8
    plan, begin = [], 0
    for k in range(1, count + 1):
        ideal = p * k // count
        end = ideal
        if k < count:
            snapped = _nearest_tensor_boundary(ends, ideal)
            if abs(snapped - ideal) <= tolerance and begin < snapped < p:
                end = snapped
        if end <= begin:
            end = begin + 1  # P >= S: an ideal cut is always past the last
        plan.append((begin, end))
        begin = end
    return plan
