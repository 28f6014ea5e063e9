"""The self-made proxy corpus: camera-like real anchors and pseudo-generated counterparts. A dataset, not a
detector, and a proxy for AI-generated video, not AI-generated video: every report made on it says so."""
