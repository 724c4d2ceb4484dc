// The kernel-free slider of a widget plot: moving a control shows another stored frame.
// Inlined into each plot's HTML by widgets.py, with __UID__ replaced by the plot's id.
(function () {
  var script = document.currentScript;
  var root = (script && script.parentNode) || document.getElementById('__UID__');
  if (!root) return;
  // names, labels, strides (frame index = sum of control index * stride),
  // index (frame index -> unique PNG), frames (base64 PNGs; "" = the first one), title
  var data = JSON.parse(root.querySelector('script.clwp-data').textContent);
  var img = root.querySelector('img.clwp-frame');
  var firstFrame = img.getAttribute('src');
  var controls = root.querySelectorAll('[data-clwp-control]');
  function update() {
    var frame = 0, state = [];
    for (var i = 0; i < controls.length; i++) {
      var c = controls[i];
      var k = c.type === 'checkbox' ? (c.checked ? 1 : 0) : parseInt(c.value, 10);
      frame += k * data.strides[i];
      state.push(data.names[i] + ' = ' + data.labels[i][k]);
      var readout = root.querySelector('[data-clwp-readout="' + i + '"]');
      if (readout) readout.textContent = data.labels[i][k];
    }
    var png = data.frames[data.index[frame]];
    img.src = png ? 'data:image/png;base64,' + png : firstFrame;
    img.setAttribute('data-frame', frame);
    img.alt = (data.title ? data.title + ': ' : '') + state.join(', ');
  }
  for (var i = 0; i < controls.length; i++) {
    controls[i].addEventListener('input', update);
    controls[i].addEventListener('change', update);
  }
})();
