// Draws a mirror's lag and throughput over the last hour with uPlot, and
// redraws it as often as the console samples /metrics. Without JavaScript the page shows everything else.
(() => {
  const element = document.getElementById('history-chart');
  if (!element || typeof uPlot === 'undefined') return;
  const url = element.dataset.history;
  let chart;
  const options = () => ({
    width: Math.min(element.clientWidth || 640, 900),
    height: 240,
    series: [
      {},
      { label: 'lag (bytes)', stroke: '#0645ad', width: 2, scale: 'bytes' },
      { label: 'rows/s', stroke: '#a40000', width: 2, scale: 'rows' },
    ],
    axes: [{}, { scale: 'bytes', size: 80 }, { scale: 'rows', side: 1, size: 60, grid: { show: false } }],
  });
  const draw = async () => {
    const response = await fetch(url, { credentials: 'same-origin' });
    if (!response.ok) return;
    const history = await response.json();
    const data = [history.time, history.lagBytes, history.rowsPerSecond];
    if (chart) chart.setData(data);
    else chart = new uPlot(options(), data, element);
    element.dataset.points = String(history.time.length);
  };
  draw();
  setInterval(draw, Number(element.dataset.refreshMs) || 10_000);
})();
