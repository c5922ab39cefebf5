
/** `discovery`: one device per present candidate, named after it. */
export const discovery = {
  discover(candidates) {
    return hook(() =>
      candidates
        .filter((candidate) => candidate.present)
        .map((candidate) => ({
          id: candidate.id,
          candidates: [candidate.id],
          numaNodes: candidate.numaNodes,
          attributes: [],
          replicas: 0,
        })),
    );
  },
};
