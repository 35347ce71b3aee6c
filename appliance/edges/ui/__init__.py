"""The Gradio panel (``appliance serve``): a view over the facade."""
